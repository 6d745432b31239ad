package keycaststore

import (
	"context"
	"errors"
	"strings"
	"time"
)

// Errors callers branch on. They are compared with errors.Is.
var (
	// ErrNotFound: no row matched (unknown tenant, user, code, authorization or policy).
	ErrNotFound = errors.New("keycaststore: not found")
	// ErrDuplicateEmail: the tenant already has a user with this email (index idx_users_email_tenant).
	ErrDuplicateEmail = errors.New("keycaststore: a user with this email already exists in the tenant; log in instead or pick another email")
	// ErrDuplicateKey: a user with this public key already exists (users primary key) or already has a personal key.
	ErrDuplicateKey = errors.New("keycaststore: a user with this public key already exists; log in instead or use a different key")
	// ErrCodeUsed: the authorization code was consumed by another exchange between lookup and delete.
	ErrCodeUsed = errors.New("keycaststore: authorization code was already used")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("keycaststore: store is closed")
)

// Dialect names a database back end.
type Dialect int

const (
	// SQLite is an SQLite file opened with modernc.org/sqlite (pure Go), in WAL mode.
	SQLite Dialect = iota
	// Postgres is PostgreSQL through github.com/jackc/pgx/v5.
	Postgres
)

// String returns "sqlite" or "postgres".
func (d Dialect) String() string {
	if d == Postgres {
		return "postgres"
	}
	return "sqlite"
}

// DialectOf returns the back end a DATABASE_URL selects: postgres:// and postgresql:// URLs select
// PostgreSQL; anything else is an SQLite path (an optional "sqlite://" or "file:" prefix is allowed).
func DialectOf(databaseURL string) Dialect {
	u := strings.ToLower(strings.TrimSpace(databaseURL))
	if strings.HasPrefix(u, "postgres://") || strings.HasPrefix(u, "postgresql://") {
		return Postgres
	}
	return SQLite
}

// DefaultTenantID is the tenant seeded by the first migration (domain "default").
const DefaultTenantID int64 = 1

// Tenant is a row of tenants.
type Tenant struct {
	ID     int64
	Domain string
	Name   string
}

// User is a row of users. PasswordHash is a bcrypt hash; EmailVerified mirrors the column.
type User struct {
	Pubkey        string // 64 lower-case hex, x-only
	TenantID      int64
	Email         string
	PasswordHash  string
	EmailVerified bool
	// VerificationToken and VerificationExpiresAt are optional (empty / zero = NULL).
	VerificationToken     string
	VerificationExpiresAt time.Time
	CreatedAt             time.Time // zero = now
}

// Code is a row of oauth_codes: a single-use authorization code.
type Code struct {
	Code                string
	TenantID            int64
	UserPubkey          string
	ClientID            string
	RedirectURI         string
	Scope               string
	CodeChallenge       string // empty = no PKCE
	CodeChallengeMethod string // empty = not sent (PKCE then defaults to "plain")
	ExpiresAt           time.Time
	PreviousAuthID      int64 // 0 = none
	CreatedAt           time.Time
}

// Authorization is a row of oauth_authorizations.
type Authorization struct {
	ID              int64 // set by CreateAuthorization
	TenantID        int64
	UserPubkey      string
	RedirectOrigin  string
	ClientID        string
	BunkerPubkey    string // column bunker_public_key
	Secret          string // connection secret (plaintext, as upstream)
	Relays          string // JSON array text
	PolicyID        int64  // 0 = NULL (full access)
	ExpiresAt       time.Time
	RevokedAt       time.Time // zero = NULL
	Handle          string    // authorization_handle, 64 hex
	HandleExpiresAt time.Time
	CreatedAt       time.Time // zero = now
}

// Valid reports whether a is usable at now: not revoked and not past expires_at (a zero
// ExpiresAt never expires), Keycast's rule (docs/protocol-keycast.md, Expiry and revocation).
func (a *Authorization) Valid(now time.Time) bool {
	if !a.RevokedAt.IsZero() {
		return false
	}
	return a.ExpiresAt.IsZero() || !now.After(a.ExpiresAt)
}

// Permission is a row of permissions: an identifier and its JSON config text.
type Permission struct {
	ID         int64
	Identifier string
	Config     string
}

// Policy is a row of policies with its permissions (through policy_permissions), in id order.
type Policy struct {
	ID          int64
	Name        string
	Slug        string
	DisplayName string // falls back to Name when NULL
	Description string
	Permissions []Permission
}

// Handler is what the RPC path loads on a handler-cache miss: the authorization, the user's
// sealed secret key (personal_keys.encrypted_secret_key) and the policy's permissions.
type Handler struct {
	Authorization      Authorization
	EncryptedSecretKey []byte
	Permissions        []Permission // nil when PolicyID is 0
}

// Provision is one user with its personal key and one authorization, for bulk setup (the load
// tool's DB mode). Authorization.UserPubkey and TenantID default to the user's.
type Provision struct {
	User               User
	EncryptedSecretKey []byte
	Authorization      Authorization
}

// Store is the storage the Keycast reference server and the load tool's DB-mode setup share. Both
// back ends implement it with the same schema; every method is safe for concurrent use. Methods
// that take a tenant id scope their lookup to it.
type Store interface {
	// Dialect reports the back end.
	Dialect() Dialect
	// Ping checks the database answers (readiness).
	Ping(ctx context.Context) error
	// Close releases the connections.
	Close() error

	// TenantByDomain looks a tenant up by domain (ErrNotFound when absent).
	TenantByDomain(ctx context.Context, domain string) (Tenant, error)
	// EnsureTenant returns the tenant for domain, creating it with name when absent; concurrent
	// callers get the same row.
	EnsureTenant(ctx context.Context, domain, name string) (Tenant, error)
	// CountTenants returns how many tenants exist (the seeded "default" included).
	CountTenants(ctx context.Context) (int64, error)

	// CreateUserWithKeys inserts users and personal_keys rows in one transaction.
	// ErrDuplicateEmail or ErrDuplicateKey when the user exists.
	CreateUserWithKeys(ctx context.Context, u User, encryptedSecretKey []byte) error
	// UserByEmail finds a user with a password in the tenant.
	UserByEmail(ctx context.Context, tenantID int64, email string) (User, error)
	// UserByPubkey finds a user by public key.
	UserByPubkey(ctx context.Context, pubkey string) (User, error)
	// PersonalKey returns the sealed secret key of a user.
	PersonalKey(ctx context.Context, userPubkey string) ([]byte, error)

	// CreateCode stores an authorization code.
	CreateCode(ctx context.Context, c Code) error
	// CodeByValue returns an unexpired code of the tenant (ErrNotFound when missing or expired).
	CodeByValue(ctx context.Context, tenantID int64, code string, now time.Time) (Code, error)
	// DeleteCode consumes a code; ErrCodeUsed when no row was deleted (someone else won).
	DeleteCode(ctx context.Context, tenantID int64, code string) error
	// DeleteExpiredCodes removes codes that expired before now and returns how many.
	DeleteExpiredCodes(ctx context.Context, now time.Time) (int64, error)

	// CreateAuthorization inserts an authorization and returns its id.
	CreateAuthorization(ctx context.Context, a Authorization) (int64, error)
	// AuthorizationByBunker returns the newest authorization for a bunker public key.
	AuthorizationByBunker(ctx context.Context, bunkerPubkey string) (Authorization, error)
	// LoadHandler returns what the RPC path needs for a bunker public key, in one round trip for
	// the authorization and key plus one for the permissions when a policy is set.
	LoadHandler(ctx context.Context, bunkerPubkey string) (Handler, error)
	// RevokeAuthorizations sets revoked_at on the user's unrevoked authorizations for bunkerPubkey
	// in the tenant and returns their ids (ErrNotFound when none matched).
	RevokeAuthorizations(ctx context.Context, tenantID int64, userPubkey, bunkerPubkey string, now time.Time) ([]int64, error)
	// RevokeAuthorizationByID revokes one authorization by id (used when a code carries
	// previous_auth_id). It is not an error when the row is already revoked.
	RevokeAuthorizationByID(ctx context.Context, id int64, now time.Time) error

	// Policies lists the global policies that have a slug, with their permissions, in id order.
	Policies(ctx context.Context) ([]Policy, error)
	// PolicyBySlug returns one global policy.
	PolicyBySlug(ctx context.Context, slug string) (Policy, error)
	// PolicyPermissions returns a policy's permissions in id order.
	PolicyPermissions(ctx context.Context, policyID int64) ([]Permission, error)

	// Provision inserts users, personal keys and authorizations in batched transactions; for
	// bulk setup. It stops at the first error and reports the index it failed on.
	Provision(ctx context.Context, batch []Provision) error
}
