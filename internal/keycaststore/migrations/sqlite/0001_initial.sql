-- Keycast reference schema, SQLite dialect: the same tables, columns and indexes as the
-- PostgreSQL dialect. Timestamps are INTEGER milliseconds since the Unix epoch (UTC); booleans are
-- INTEGER 0/1; bytea is BLOB.

CREATE TABLE tenants (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    domain      TEXT NOT NULL,
    name        TEXT NOT NULL,
    settings    TEXT,
    created_at  INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER)),
    updated_at  INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER)),
    CONSTRAINT tenants_domain_key UNIQUE (domain)
);

CREATE TABLE users (
    pubkey                        TEXT NOT NULL,
    tenant_id                     INTEGER NOT NULL DEFAULT 1 REFERENCES tenants(id),
    email                         TEXT,
    password_hash                 TEXT,
    email_verified                INTEGER DEFAULT 0,
    email_verification_token      TEXT,
    email_verification_expires_at INTEGER,
    username                      TEXT,
    created_at                    INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER)),
    updated_at                    INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER)),
    CONSTRAINT users_pkey PRIMARY KEY (pubkey)
);
CREATE UNIQUE INDEX idx_users_email_tenant ON users (tenant_id, email);

CREATE TABLE personal_keys (
    id                   INTEGER PRIMARY KEY AUTOINCREMENT,
    user_pubkey          TEXT NOT NULL REFERENCES users(pubkey) ON DELETE CASCADE,
    encrypted_secret_key BLOB NOT NULL,
    tenant_id            INTEGER NOT NULL DEFAULT 1,
    created_at           INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER)),
    updated_at           INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER)),
    CONSTRAINT personal_keys_user_pubkey_key UNIQUE (user_pubkey)
);

CREATE TABLE permissions (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    identifier  TEXT NOT NULL,
    config      TEXT NOT NULL,
    created_at  INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER)),
    updated_at  INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER))
);

CREATE TABLE policies (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    name         TEXT NOT NULL,
    team_id      INTEGER,
    slug         TEXT,
    display_name TEXT,
    description  TEXT,
    created_at   INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER)),
    updated_at   INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER))
);
CREATE UNIQUE INDEX idx_policies_global_slug ON policies (slug) WHERE team_id IS NULL;

CREATE TABLE policy_permissions (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    policy_id     INTEGER NOT NULL REFERENCES policies(id) ON DELETE CASCADE,
    permission_id INTEGER NOT NULL REFERENCES permissions(id) ON DELETE CASCADE,
    created_at    INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER)),
    updated_at    INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER))
);
CREATE INDEX idx_policy_permissions_policy ON policy_permissions (policy_id);

CREATE TABLE oauth_codes (
    code                  TEXT PRIMARY KEY,
    user_pubkey           TEXT NOT NULL,
    client_id             TEXT,
    redirect_uri          TEXT NOT NULL,
    scope                 TEXT NOT NULL,
    expires_at            INTEGER NOT NULL,
    created_at            INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER)),
    tenant_id             INTEGER NOT NULL DEFAULT 1,
    code_challenge        TEXT,
    code_challenge_method TEXT,
    previous_auth_id      INTEGER
);
CREATE INDEX idx_oauth_codes_expires ON oauth_codes (expires_at);

CREATE TABLE oauth_authorizations (
    id                      INTEGER PRIMARY KEY AUTOINCREMENT,
    user_pubkey             TEXT NOT NULL,
    redirect_origin         TEXT,
    client_id               TEXT,
    bunker_public_key       TEXT NOT NULL,
    secret                  TEXT NOT NULL,
    relays                  TEXT NOT NULL,
    policy_id               INTEGER,
    expires_at              INTEGER,
    tenant_id               INTEGER NOT NULL DEFAULT 1,
    client_pubkey           TEXT,
    connected_client_pubkey TEXT,
    connected_at            INTEGER,
    last_activity           INTEGER,
    activity_count          INTEGER NOT NULL DEFAULT 0,
    revoked_at              INTEGER,
    authorization_handle    TEXT,
    handle_expires_at       INTEGER NOT NULL,
    created_at              INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER)),
    updated_at              INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER))
);
CREATE INDEX idx_oauth_authorizations_bunker_active ON oauth_authorizations (bunker_public_key) WHERE revoked_at IS NULL;
CREATE INDEX idx_oauth_authorizations_bunker_tenant ON oauth_authorizations (bunker_public_key, tenant_id);
CREATE INDEX idx_oauth_authorizations_user ON oauth_authorizations (user_pubkey);
