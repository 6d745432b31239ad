// Package keycaststore is the storage of the Keycast reference server: one logical schema with
// embedded migrations for SQLite (modernc.org/sqlite, pure Go) and PostgreSQL
// (github.com/jackc/pgx/v5), and a [Store] with the operations the server needs.
//
// It is a package of its own, not part of internal/keycastserver, because the load tool's DB-mode
// setup (internal/keycastload) writes users, personal keys and authorizations straight into the
// server's database, and load packages must not import server packages. Storage is neither.
//
// # Choosing the back end
//
// [Open] takes a DATABASE_URL: "postgres://…" or "postgresql://…" selects PostgreSQL; anything
// else is an SQLite file path (optionally prefixed "sqlite://" or "file:"). The reference server's
// default is <data-dir>/keycast.sqlite3. SQLite runs in WAL mode with busy_timeout (5 s default),
// synchronous=NORMAL, foreign keys on and immediate write transactions. Open applies pending
// migrations in one transaction; concurrent starters are serialized.
//
// # Schema contract
//
// Table and column names are those of the Keycast server (docs/protocol-keycast.md, Tables), so that
// SQL written against upstream's schema, including upstream's own DB-mode setup, also works here.
// Only the tables and columns the reference server uses are present:
//
//	tenants(id, domain UNIQUE, name, settings, created_at, updated_at)
//	    id 1, domain "default", is seeded.
//	users(pubkey PK, tenant_id, email, password_hash, email_verified, email_verification_token,
//	      email_verification_expires_at, username, created_at, updated_at)
//	    UNIQUE (tenant_id, email) as idx_users_email_tenant; pubkey is the 64-hex x-only key.
//	personal_keys(id, user_pubkey UNIQUE → users, encrypted_secret_key, tenant_id, created_at, updated_at)
//	    encrypted_secret_key is keycast.MasterKey.Seal of the raw 32-byte secret:
//	    nonce(12) ‖ AES-256-GCM ciphertext ‖ tag(16), as Keycast's file key manager.
//	permissions(id, identifier, config JSON text, …)
//	policies(id, name, team_id, slug, display_name, description, …)
//	policy_permissions(id, policy_id, permission_id, …)
//	    seeded: social, readonly, wallet, full with Keycast's permissions.
//	oauth_codes(code PK, user_pubkey, client_id, redirect_uri, scope, expires_at, created_at,
//	            tenant_id, code_challenge, code_challenge_method, previous_auth_id)
//	oauth_authorizations(id, user_pubkey, redirect_origin, client_id, bunker_public_key, secret,
//	            relays JSON text, policy_id NULL = full access, expires_at NULL = never,
//	            tenant_id, client_pubkey, connected_client_pubkey, connected_at, last_activity,
//	            activity_count, revoked_at NULL = active, authorization_handle, handle_expires_at,
//	            created_at, updated_at)
//	schema_migrations(version, name)
//
// The dialects differ only in representation: PostgreSQL uses TIMESTAMPTZ, BOOLEAN, BYTEA and
// CHAR(64) for keys; SQLite uses INTEGER milliseconds since the Unix epoch (UTC), INTEGER 0/1,
// BLOB and TEXT. Write through the Store (for example [Store.Provision] or
// [Store.CreateUserWithKeys] and [Store.CreateAuthorization]) rather than raw SQL and the
// difference never shows.
//
// # What the server reads on the RPC path
//
// An access token carries bunker_pubkey. On a handler-cache miss the server calls
// [Store.LoadHandler] with it: the newest unrevoked oauth_authorizations row for that
// bunker_public_key (a revoked row is returned only when no unrevoked one exists, so that the
// caller can refuse it), joined with personal_keys on user_pubkey, plus the policy's permissions.
// A row written for RPC use therefore needs a personal_keys row for its user, sealed with the
// server's master key; without one the server answers 500 "Personal keys not found".
package keycaststore
