package keycaststore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Options tunes Open. The zero value is ready to use.
type Options struct {
	// MaxOpenConns caps the connection pool. Zero means 8 for SQLite (one writer at a time in
	// any case; readers run in parallel under WAL) and 16 for PostgreSQL.
	MaxOpenConns int
	// BusyTimeout is SQLite's busy_timeout: how long a writer waits for the lock before the
	// statement fails. Zero means 5 s.
	BusyTimeout time.Duration
	// Schema, PostgreSQL only: when set, the schema is created if absent and every connection
	// uses it as search_path, so that parallel test runs do not collide. Empty means the
	// server's default search_path. The name must be a plain identifier ([a-z_][a-z0-9_]*).
	Schema string
	// NoMigrate skips applying migrations at Open (the schema must already be current).
	NoMigrate bool
}

// Open connects to databaseURL (see DialectOf), applies any pending migrations and returns the
// store. For SQLite the file is created when absent (mode 0600; its directory must exist), an
// existing file and its -wal and -shm lose any group and other access, and it is opened in WAL
// mode with busy_timeout, foreign keys and immediate write transactions.
func Open(ctx context.Context, databaseURL string, opt Options) (Store, error) {
	d := DialectOf(databaseURL)
	var (
		db  *sql.DB
		err error
	)
	switch d {
	case Postgres:
		db, err = openPostgres(ctx, databaseURL, opt)
	default:
		db, err = openSQLite(databaseURL, opt)
	}
	if err != nil {
		return nil, err
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("keycaststore: connecting to %s database %s: %w", d, redactURL(databaseURL), err)
	}
	if d == SQLite {
		// The first connection created -wal and -shm; ones left by an older version may be looser.
		if f := sqliteFilePath(databaseURL); f != "" {
			for _, p := range []string{f + "-wal", f + "-shm", f + "-journal"} {
				if err := makePrivate(p, false); err != nil {
					db.Close()
					return nil, err
				}
			}
		}
	}
	if !opt.NoMigrate {
		if err := migrate(ctx, db, d); err != nil {
			db.Close()
			return nil, err
		}
	}
	s := &sqlStore{db: db, dialect: d}
	s.q = buildQueries(d)
	return s, nil
}

func openSQLite(databaseURL string, opt Options) (*sql.DB, error) {
	path := strings.TrimSpace(databaseURL)
	path = strings.TrimPrefix(path, "sqlite://")
	path = strings.TrimPrefix(path, "sqlite:")
	path = strings.TrimPrefix(path, "file:")
	if path == "" {
		return nil, errors.New("keycaststore: empty SQLite path; set DATABASE_URL to a file path or a postgres:// URL")
	}
	// The file holds password hashes and sealed keys: 0600 even when the directory already
	// existed with a looser mode (SQLite creates -wal and -shm with the database file's mode).
	if f := sqliteFilePath(path); f != "" {
		if err := makePrivate(f, true); err != nil {
			return nil, err
		}
	}
	busy := opt.BusyTimeout
	if busy <= 0 {
		busy = 5 * time.Second
	}
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	dsn := "file:" + path + sep +
		"_pragma=busy_timeout(" + strconv.FormatInt(busy.Milliseconds(), 10) + ")" +
		"&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(1)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("keycaststore: opening SQLite database %s: %w", path, err)
	}
	n := opt.MaxOpenConns
	if n <= 0 {
		n = 8
	}
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	return db, nil
}

// sqliteFilePath is the file of an SQLite path (query parameters dropped), or "" for an
// in-memory database.
func sqliteFilePath(path string) string {
	path = strings.TrimSpace(path)
	for _, p := range []string{"sqlite://", "sqlite:", "file:"} {
		path = strings.TrimPrefix(path, p)
	}
	f, query, _ := strings.Cut(path, "?")
	if f == "" || f == ":memory:" || strings.Contains(query, "mode=memory") {
		return ""
	}
	return f
}

// makePrivate gives path mode 0600: it creates the file when create is set and it is absent, and
// takes group and other access away from an existing one. A missing file is fine when create is
// false.
func makePrivate(path string, create bool) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist) && create:
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, os.ErrExist) {
			return makePrivate(path, false)
		}
		if err != nil {
			return fmt.Errorf("keycaststore: creating SQLite database %s: %w (its directory must exist and be writable)", path, err)
		}
		return f.Close()
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("keycaststore: checking SQLite database %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o077 == 0 {
		return nil
	}
	if err := os.Chmod(path, 0o600); err != nil {
		return fmt.Errorf("keycaststore: making %s private (it holds password hashes and sealed keys): %w", path, err)
	}
	return nil
}

func openPostgres(ctx context.Context, databaseURL string, opt Options) (*sql.DB, error) {
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("keycaststore: DATABASE_URL %s is not a valid PostgreSQL URL: %w", redactURL(databaseURL), err)
	}
	if opt.Schema != "" {
		if !plainIdent(opt.Schema) {
			return nil, fmt.Errorf("keycaststore: schema name %q must match [a-z_][a-z0-9_]*", opt.Schema)
		}
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			return nil, fmt.Errorf("keycaststore: connecting to PostgreSQL %s: %w", redactURL(databaseURL), err)
		}
		_, err = conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+opt.Schema)
		conn.Close(ctx)
		if err != nil {
			return nil, fmt.Errorf("keycaststore: creating schema %s: %w", opt.Schema, err)
		}
		cfg.RuntimeParams["search_path"] = opt.Schema
	}
	db := stdlib.OpenDB(*cfg)
	n := opt.MaxOpenConns
	if n <= 0 {
		n = 16
	}
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	db.SetConnMaxIdleTime(5 * time.Minute)
	return db, nil
}

func plainIdent(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for i, c := range s {
		switch {
		case c == '_' || (c >= 'a' && c <= 'z'):
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// redactURL drops a password from a URL for messages.
func redactURL(u string) string {
	at := strings.LastIndexByte(u, '@')
	scheme := strings.Index(u, "://")
	if at < 0 || scheme < 0 || at < scheme {
		return u
	}
	userinfo := u[scheme+3 : at]
	if i := strings.IndexByte(userinfo, ':'); i >= 0 {
		return u[:scheme+3] + userinfo[:i] + ":xxxxx" + u[at:]
	}
	return u
}

type sqlStore struct {
	db      *sql.DB
	dialect Dialect
	q       queries
	closed  atomic.Bool
}

func (s *sqlStore) Dialect() Dialect { return s.dialect }

func (s *sqlStore) Ping(ctx context.Context) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if err := s.db.PingContext(ctx); err != nil {
		return fmt.Errorf("keycaststore: %s database does not answer: %w", s.dialect, err)
	}
	return nil
}

func (s *sqlStore) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	return s.db.Close()
}

// ts converts a time to the column representation: timestamptz for PostgreSQL, Unix
// milliseconds for SQLite.
func (s *sqlStore) ts(t time.Time) any {
	if s.dialect == Postgres {
		return t.UTC()
	}
	return t.UnixMilli()
}

// nts is ts with the zero time as NULL.
func (s *sqlStore) nts(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return s.ts(t)
}

func nstr(v string) any {
	if v == "" {
		return nil
	}
	return v
}

func nint(v int64) any {
	if v == 0 {
		return nil
	}
	return v
}

func nowIfZero(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now()
	}
	return t
}

// timeCol scans either representation (and NULL as the zero time).
type timeCol struct{ t *time.Time }

func (c timeCol) Scan(v any) error {
	switch x := v.(type) {
	case nil:
		*c.t = time.Time{}
	case time.Time:
		*c.t = x
	case int64:
		*c.t = time.UnixMilli(x)
	case float64:
		*c.t = time.UnixMilli(int64(x))
	case []byte:
		return c.Scan(string(x))
	case string:
		if n, err := strconv.ParseInt(x, 10, 64); err == nil {
			*c.t = time.UnixMilli(n)
			return nil
		}
		for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999-07:00", "2006-01-02 15:04:05.999999999", "2006-01-02 15:04:05"} {
			if t, err := time.Parse(layout, x); err == nil {
				*c.t = t
				return nil
			}
		}
		return fmt.Errorf("keycaststore: cannot read timestamp %q", x)
	default:
		return fmt.Errorf("keycaststore: cannot read timestamp from %T", v)
	}
	return nil
}

// strCol scans a nullable text column; NULL becomes "". CHAR(n) padding is trimmed.
type strCol struct{ s *string }

func (c strCol) Scan(v any) error {
	switch x := v.(type) {
	case nil:
		*c.s = ""
	case string:
		*c.s = strings.TrimRight(x, " ")
	case []byte:
		*c.s = strings.TrimRight(string(x), " ")
	default:
		return fmt.Errorf("keycaststore: cannot read text from %T", v)
	}
	return nil
}

// intCol scans a nullable integer column; NULL becomes 0.
type intCol struct{ n *int64 }

func (c intCol) Scan(v any) error {
	switch x := v.(type) {
	case nil:
		*c.n = 0
	case int64:
		*c.n = x
	case int32:
		*c.n = int64(x)
	case float64:
		*c.n = int64(x)
	case []byte:
		n, err := strconv.ParseInt(string(x), 10, 64)
		if err != nil {
			return fmt.Errorf("keycaststore: cannot read integer %q", x)
		}
		*c.n = n
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return fmt.Errorf("keycaststore: cannot read integer %q", x)
		}
		*c.n = n
	default:
		return fmt.Errorf("keycaststore: cannot read integer from %T", v)
	}
	return nil
}

// boolCol scans a nullable boolean (PostgreSQL bool or SQLite 0/1); NULL becomes false.
type boolCol struct{ b *bool }

func (c boolCol) Scan(v any) error {
	switch x := v.(type) {
	case nil:
		*c.b = false
	case bool:
		*c.b = x
	case int64:
		*c.b = x != 0
	default:
		return fmt.Errorf("keycaststore: cannot read boolean from %T", v)
	}
	return nil
}

// classify maps driver errors to the package's sentinels.
func classify(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNotFound
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		if strings.Contains(pe.ConstraintName, "email") {
			return fmt.Errorf("%w (%s)", ErrDuplicateEmail, pe.ConstraintName)
		}
		return fmt.Errorf("%w (%s)", ErrDuplicateKey, pe.ConstraintName)
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			msg := se.Error()
			if strings.Contains(msg, "email") {
				return fmt.Errorf("%w (%s)", ErrDuplicateEmail, msg)
			}
			return fmt.Errorf("%w (%s)", ErrDuplicateKey, msg)
		}
	}
	return err
}

func (s *sqlStore) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	c := classify(err)
	if errors.Is(c, ErrNotFound) || errors.Is(c, ErrDuplicateEmail) || errors.Is(c, ErrDuplicateKey) {
		return c
	}
	if s.closed.Load() {
		return ErrClosed
	}
	return fmt.Errorf("keycaststore: %s (%s): %w", op, s.dialect, err)
}

// ---- tenants ----

func (s *sqlStore) TenantByDomain(ctx context.Context, domain string) (Tenant, error) {
	t := Tenant{Domain: domain}
	err := s.db.QueryRowContext(ctx, s.q.tenantByDomain, domain).Scan(&t.ID, &t.Name)
	if err != nil {
		return Tenant{}, s.wrap("looking up tenant "+strconv.Quote(domain), err)
	}
	return t, nil
}

func (s *sqlStore) EnsureTenant(ctx context.Context, domain, name string) (Tenant, error) {
	if t, err := s.TenantByDomain(ctx, domain); err == nil || !errors.Is(err, ErrNotFound) {
		return t, err
	}
	now := time.Now()
	if _, err := s.db.ExecContext(ctx, s.q.insertTenant, domain, name, s.ts(now), s.ts(now)); err != nil {
		return Tenant{}, s.wrap("creating tenant "+strconv.Quote(domain), err)
	}
	return s.TenantByDomain(ctx, domain)
}

func (s *sqlStore) CountTenants(ctx context.Context) (int64, error) {
	var n int64
	if err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM tenants").Scan(&n); err != nil {
		return 0, s.wrap("counting tenants", err)
	}
	return n, nil
}

// ---- users ----

func (s *sqlStore) CreateUserWithKeys(ctx context.Context, u User, encryptedSecretKey []byte) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return s.wrap("starting user transaction", err)
	}
	defer tx.Rollback()
	if err := s.insertUser(ctx, tx, u, encryptedSecretKey); err != nil {
		return err
	}
	return s.wrap("committing user", tx.Commit())
}

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (s *sqlStore) insertUser(ctx context.Context, x execer, u User, sealed []byte) error {
	if len(sealed) == 0 {
		return errors.New("keycaststore: creating user without an encrypted secret key; seal the key with the master key first")
	}
	tenant := u.TenantID
	if tenant == 0 {
		tenant = DefaultTenantID
	}
	created := nowIfZero(u.CreatedAt)
	if _, err := x.ExecContext(ctx, s.q.insertUser, u.Pubkey, tenant, nstr(u.Email), nstr(u.PasswordHash),
		u.EmailVerified, nstr(u.VerificationToken), s.nts(u.VerificationExpiresAt), s.ts(created), s.ts(created)); err != nil {
		return s.wrap("inserting user", err)
	}
	if _, err := x.ExecContext(ctx, s.q.insertPersonalKey, u.Pubkey, sealed, tenant, s.ts(created), s.ts(created)); err != nil {
		return s.wrap("inserting personal key", err)
	}
	return nil
}

func (s *sqlStore) scanUser(row *sql.Row, what string) (User, error) {
	var u User
	err := row.Scan(strCol{&u.Pubkey}, &u.TenantID, strCol{&u.Email}, strCol{&u.PasswordHash}, boolCol{&u.EmailVerified},
		strCol{&u.VerificationToken}, timeCol{&u.VerificationExpiresAt}, timeCol{&u.CreatedAt})
	if err != nil {
		return User{}, s.wrap(what, err)
	}
	return u, nil
}

func (s *sqlStore) UserByEmail(ctx context.Context, tenantID int64, email string) (User, error) {
	return s.scanUser(s.db.QueryRowContext(ctx, s.q.userByEmail, email, tenantID), "looking up user by email")
}

func (s *sqlStore) UserByPubkey(ctx context.Context, pubkey string) (User, error) {
	return s.scanUser(s.db.QueryRowContext(ctx, s.q.userByPubkey, pubkey), "looking up user by pubkey")
}

func (s *sqlStore) PersonalKey(ctx context.Context, userPubkey string) ([]byte, error) {
	var b []byte
	if err := s.db.QueryRowContext(ctx, s.q.personalKey, userPubkey).Scan(&b); err != nil {
		return nil, s.wrap("reading personal key", err)
	}
	return b, nil
}

// ---- codes ----

func (s *sqlStore) CreateCode(ctx context.Context, c Code) error {
	created := nowIfZero(c.CreatedAt)
	_, err := s.db.ExecContext(ctx, s.q.insertCode, c.Code, c.UserPubkey, nstr(c.ClientID), c.RedirectURI, c.Scope,
		s.ts(c.ExpiresAt), s.ts(created), c.TenantID, nstr(c.CodeChallenge), nstr(c.CodeChallengeMethod), nint(c.PreviousAuthID))
	if err != nil {
		if errors.Is(classify(err), ErrDuplicateKey) {
			return fmt.Errorf("keycaststore: authorization code collision; generate a new code: %w", err)
		}
		return s.wrap("storing authorization code", err)
	}
	return nil
}

func (s *sqlStore) CodeByValue(ctx context.Context, tenantID int64, code string, now time.Time) (Code, error) {
	c := Code{Code: code, TenantID: tenantID}
	err := s.db.QueryRowContext(ctx, s.q.codeByValue, tenantID, code, s.ts(now)).Scan(
		strCol{&c.UserPubkey}, strCol{&c.ClientID}, &c.RedirectURI, &c.Scope, timeCol{&c.ExpiresAt},
		strCol{&c.CodeChallenge}, strCol{&c.CodeChallengeMethod}, intCol{&c.PreviousAuthID}, timeCol{&c.CreatedAt})
	if err != nil {
		return Code{}, s.wrap("looking up authorization code", err)
	}
	return c, nil
}

func (s *sqlStore) DeleteCode(ctx context.Context, tenantID int64, code string) error {
	res, err := s.db.ExecContext(ctx, s.q.deleteCode, tenantID, code)
	if err != nil {
		return s.wrap("deleting authorization code", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return s.wrap("deleting authorization code", err)
	}
	if n == 0 {
		return ErrCodeUsed
	}
	return nil
}

func (s *sqlStore) DeleteExpiredCodes(ctx context.Context, now time.Time) (int64, error) {
	res, err := s.db.ExecContext(ctx, s.q.deleteExpiredCodes, s.ts(now))
	if err != nil {
		return 0, s.wrap("deleting expired codes", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

// ---- authorizations ----

func (s *sqlStore) CreateAuthorization(ctx context.Context, a Authorization) (int64, error) {
	return s.insertAuthorization(ctx, s.db, a)
}

func (s *sqlStore) insertAuthorization(ctx context.Context, x execer, a Authorization) (int64, error) {
	tenant := a.TenantID
	if tenant == 0 {
		tenant = DefaultTenantID
	}
	created := nowIfZero(a.CreatedAt)
	relays := a.Relays
	if relays == "" {
		relays = "[]"
	}
	var id int64
	err := x.QueryRowContext(ctx, s.q.insertAuthorization, a.UserPubkey, nstr(a.RedirectOrigin), nstr(a.ClientID),
		a.BunkerPubkey, a.Secret, relays, nint(a.PolicyID), s.nts(a.ExpiresAt), tenant, s.nts(a.RevokedAt),
		nstr(a.Handle), s.ts(a.HandleExpiresAt), s.ts(created), s.ts(created)).Scan(&id)
	if err != nil {
		return 0, s.wrap("inserting authorization", err)
	}
	return id, nil
}

const authCols = "a.id, a.tenant_id, a.user_pubkey, a.redirect_origin, a.client_id, a.bunker_public_key, a.secret, a.relays, " +
	"a.policy_id, a.expires_at, a.revoked_at, a.authorization_handle, a.handle_expires_at, a.created_at"

func authDest(a *Authorization) []any {
	return []any{&a.ID, &a.TenantID, strCol{&a.UserPubkey}, strCol{&a.RedirectOrigin}, strCol{&a.ClientID},
		strCol{&a.BunkerPubkey}, &a.Secret, &a.Relays, intCol{&a.PolicyID}, timeCol{&a.ExpiresAt}, timeCol{&a.RevokedAt},
		strCol{&a.Handle}, timeCol{&a.HandleExpiresAt}, timeCol{&a.CreatedAt}}
}

func (s *sqlStore) AuthorizationByBunker(ctx context.Context, bunkerPubkey string) (Authorization, error) {
	var a Authorization
	if err := s.db.QueryRowContext(ctx, s.q.authByBunker, bunkerPubkey).Scan(authDest(&a)...); err != nil {
		return Authorization{}, s.wrap("looking up authorization", err)
	}
	return a, nil
}

func (s *sqlStore) LoadHandler(ctx context.Context, bunkerPubkey string) (Handler, error) {
	var h Handler
	dest := append(authDest(&h.Authorization), &h.EncryptedSecretKey)
	if err := s.db.QueryRowContext(ctx, s.q.loadHandler, bunkerPubkey).Scan(dest...); err != nil {
		return Handler{}, s.wrap("loading handler", err)
	}
	if h.Authorization.PolicyID != 0 {
		perms, err := s.PolicyPermissions(ctx, h.Authorization.PolicyID)
		if err != nil {
			return Handler{}, err
		}
		h.Permissions = perms
	}
	return h, nil
}

func (s *sqlStore) RevokeAuthorizations(ctx context.Context, tenantID int64, userPubkey, bunkerPubkey string, now time.Time) ([]int64, error) {
	rows, err := s.db.QueryContext(ctx, s.q.revokeAuth, s.ts(now), s.ts(now), bunkerPubkey, userPubkey, tenantID)
	if err != nil {
		return nil, s.wrap("revoking authorization", err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, s.wrap("revoking authorization", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("revoking authorization", err)
	}
	if len(ids) == 0 {
		return nil, ErrNotFound
	}
	return ids, nil
}

func (s *sqlStore) RevokeAuthorizationByID(ctx context.Context, id int64, now time.Time) error {
	_, err := s.db.ExecContext(ctx, s.q.revokeAuthByID, s.ts(now), s.ts(now), id)
	return s.wrap("revoking authorization by id", err)
}

// ---- policies ----

func (s *sqlStore) Policies(ctx context.Context) ([]Policy, error) {
	rows, err := s.db.QueryContext(ctx, s.q.policies)
	if err != nil {
		return nil, s.wrap("listing policies", err)
	}
	var out []Policy
	for rows.Next() {
		var p Policy
		if err := rows.Scan(&p.ID, &p.Name, strCol{&p.Slug}, strCol{&p.DisplayName}, strCol{&p.Description}); err != nil {
			rows.Close()
			return nil, s.wrap("listing policies", err)
		}
		if p.DisplayName == "" {
			p.DisplayName = p.Name
		}
		out = append(out, p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, s.wrap("listing policies", err)
	}
	for i := range out {
		if out[i].Permissions, err = s.PolicyPermissions(ctx, out[i].ID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (s *sqlStore) PolicyBySlug(ctx context.Context, slug string) (Policy, error) {
	var p Policy
	err := s.db.QueryRowContext(ctx, s.q.policyBySlug, slug).Scan(&p.ID, &p.Name, strCol{&p.Slug}, strCol{&p.DisplayName}, strCol{&p.Description})
	if err != nil {
		return Policy{}, s.wrap("looking up policy "+strconv.Quote(slug), err)
	}
	if p.DisplayName == "" {
		p.DisplayName = p.Name
	}
	if p.Permissions, err = s.PolicyPermissions(ctx, p.ID); err != nil {
		return Policy{}, err
	}
	return p, nil
}

func (s *sqlStore) PolicyPermissions(ctx context.Context, policyID int64) ([]Permission, error) {
	rows, err := s.db.QueryContext(ctx, s.q.policyPermissions, policyID)
	if err != nil {
		return nil, s.wrap("reading policy permissions", err)
	}
	defer rows.Close()
	var out []Permission
	for rows.Next() {
		var p Permission
		if err := rows.Scan(&p.ID, &p.Identifier, &p.Config); err != nil {
			return nil, s.wrap("reading policy permissions", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("reading policy permissions", err)
	}
	return out, nil
}

// ---- bulk ----

// provisionBatch is how many provisions share one transaction.
const provisionBatch = 500

func (s *sqlStore) Provision(ctx context.Context, batch []Provision) error {
	for start := 0; start < len(batch); start += provisionBatch {
		end := min(start+provisionBatch, len(batch))
		if err := s.provisionTx(ctx, batch[start:end], start); err != nil {
			return err
		}
	}
	return nil
}

func (s *sqlStore) provisionTx(ctx context.Context, batch []Provision, offset int) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return s.wrap("starting provision transaction", err)
	}
	defer tx.Rollback()
	for i, p := range batch {
		if err := s.insertUser(ctx, tx, p.User, p.EncryptedSecretKey); err != nil {
			return fmt.Errorf("keycaststore: provision %d (user %s): %w", offset+i, p.User.Pubkey, err)
		}
		a := p.Authorization
		if a.UserPubkey == "" {
			a.UserPubkey = p.User.Pubkey
		}
		if a.TenantID == 0 {
			a.TenantID = p.User.TenantID
		}
		if _, err := s.insertAuthorization(ctx, tx, a); err != nil {
			return fmt.Errorf("keycaststore: provision %d (user %s): %w", offset+i, p.User.Pubkey, err)
		}
	}
	return s.wrap("committing provision batch", tx.Commit())
}

// ---- queries ----

type queries struct {
	tenantByDomain, insertTenant                                          string
	insertUser, insertPersonalKey, userByEmail, userByPubkey, personalKey string
	insertCode, codeByValue, deleteCode, deleteExpiredCodes               string
	insertAuthorization, authByBunker, loadHandler, revokeAuth            string
	revokeAuthByID                                                        string
	policies, policyBySlug, policyPermissions                             string
}

const userCols = "pubkey, tenant_id, email, password_hash, email_verified, email_verification_token, email_verification_expires_at, created_at"

func buildQueries(d Dialect) queries {
	r := func(q string) string { return rebind(d, q) }
	return queries{
		tenantByDomain: r("SELECT id, name FROM tenants WHERE domain = ?"),
		insertTenant:   r("INSERT INTO tenants (domain, name, created_at, updated_at) VALUES (?, ?, ?, ?) ON CONFLICT (domain) DO NOTHING"),

		insertUser: r("INSERT INTO users (pubkey, tenant_id, email, password_hash, email_verified, email_verification_token, " +
			"email_verification_expires_at, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"),
		insertPersonalKey: r("INSERT INTO personal_keys (user_pubkey, encrypted_secret_key, tenant_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?)"),
		userByEmail:       r("SELECT " + userCols + " FROM users WHERE email = ? AND tenant_id = ? AND password_hash IS NOT NULL"),
		userByPubkey:      r("SELECT " + userCols + " FROM users WHERE pubkey = ?"),
		personalKey:       r("SELECT encrypted_secret_key FROM personal_keys WHERE user_pubkey = ?"),

		insertCode: r("INSERT INTO oauth_codes (code, user_pubkey, client_id, redirect_uri, scope, expires_at, created_at, tenant_id, " +
			"code_challenge, code_challenge_method, previous_auth_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
		codeByValue: r("SELECT user_pubkey, client_id, redirect_uri, scope, expires_at, code_challenge, code_challenge_method, " +
			"previous_auth_id, created_at FROM oauth_codes WHERE tenant_id = ? AND code = ? AND expires_at > ?"),
		deleteCode:         r("DELETE FROM oauth_codes WHERE tenant_id = ? AND code = ?"),
		deleteExpiredCodes: r("DELETE FROM oauth_codes WHERE expires_at <= ?"),

		insertAuthorization: r("INSERT INTO oauth_authorizations (user_pubkey, redirect_origin, client_id, bunker_public_key, secret, relays, " +
			"policy_id, expires_at, tenant_id, revoked_at, authorization_handle, handle_expires_at, created_at, updated_at) " +
			"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id"),
		authByBunker: r("SELECT " + authCols + " FROM oauth_authorizations a WHERE a.bunker_public_key = ? " +
			"ORDER BY (a.revoked_at IS NULL) DESC, a.id DESC LIMIT 1"),
		loadHandler: r("SELECT " + authCols + ", pk.encrypted_secret_key FROM oauth_authorizations a " +
			"LEFT JOIN personal_keys pk ON pk.user_pubkey = a.user_pubkey WHERE a.bunker_public_key = ? " +
			"ORDER BY (a.revoked_at IS NULL) DESC, a.id DESC LIMIT 1"),
		revokeAuth: r("UPDATE oauth_authorizations SET revoked_at = ?, updated_at = ? WHERE bunker_public_key = ? AND user_pubkey = ? " +
			"AND tenant_id = ? AND revoked_at IS NULL RETURNING id"),
		revokeAuthByID: r("UPDATE oauth_authorizations SET revoked_at = ?, updated_at = ? WHERE id = ? AND revoked_at IS NULL"),

		policies:     "SELECT id, name, slug, display_name, description FROM policies WHERE team_id IS NULL AND slug IS NOT NULL ORDER BY id",
		policyBySlug: r("SELECT id, name, slug, display_name, description FROM policies WHERE team_id IS NULL AND slug = ?"),
		policyPermissions: r("SELECT p.id, p.identifier, p.config FROM policy_permissions pp JOIN permissions p ON p.id = pp.permission_id " +
			"WHERE pp.policy_id = ? ORDER BY p.id"),
	}
}

// rebind turns ? placeholders into PostgreSQL's $1, $2, …. The queries here have no string
// literals containing '?'.
func rebind(d Dialect, q string) string {
	if d != Postgres {
		return q
	}
	var b strings.Builder
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(q[i])
	}
	return b.String()
}
