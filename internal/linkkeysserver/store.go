package linkkeysserver

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"database/sql"
	"embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver (pure Go, no cgo)

	"github.com/loadproof/loadproof/internal/linkkeys"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migration is one embedded schema migration.
type Migration struct {
	Version int    // from the file name's numeric prefix
	Name    string // the file name
	SQL     string
}

// Migrations returns the embedded migrations in version order.
func Migrations() ([]Migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, fmt.Errorf("linkkeysserver: reading embedded migrations: %w", err)
	}
	var out []Migration
	for _, e := range entries {
		prefix, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(prefix)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("linkkeysserver: embedded migration %q: name must start with a positive version number and '_'", e.Name())
		}
		b, err := migrationFiles.ReadFile(path.Join("migrations", e.Name()))
		if err != nil {
			return nil, fmt.Errorf("linkkeysserver: reading embedded migration %s: %w", e.Name(), err)
		}
		out = append(out, Migration{Version: v, Name: e.Name(), SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			return nil, fmt.Errorf("linkkeysserver: embedded migrations %s and %s share version %d", out[i-1].Name, out[i].Name, out[i].Version)
		}
	}
	return out, nil
}

// KeySource is where the DomainKeys ops read from. *Store implements it.
type KeySource interface {
	// ActiveDomainKeys returns the keys that are neither expired nor
	// revoked, oldest first.
	ActiveDomainKeys(ctx context.Context) ([]linkkeys.DomainPublicKey, error)
	// RevocationsSince returns the issued revocations with revoked_at at or
	// after since, oldest first.
	RevocationsSince(ctx context.Context, since time.Time) ([]linkkeys.Revocation, error)
	// HasRevocationsSince reports whether any revocation was issued at or
	// after since.
	HasRevocationsSince(ctx context.Context, since time.Time) (bool, error)
}

// ChangeNotifier is implemented by key sources that report their own writes
// (Store does). A Server whose Keys implement it registers the invalidation
// of its snapshot cache, so writes through the same handle show at once;
// writes by other processes show within DOMAIN_KEY_SNAPSHOT_TTL_SECONDS.
type ChangeNotifier interface {
	OnChange(fn func())
}

// Store is the server's SQLite database: the domain_keys and
// issued_revocations tables, created by embedded migrations. It is safe for
// concurrent use.
type Store struct {
	db   *sql.DB
	path string
	// Now is the wall clock used for "active" and for new rows; tests may
	// replace it before use.
	Now func() time.Time

	mu        sync.Mutex
	listeners []func()
}

// OnChange registers fn to run after every write through this Store.
func (s *Store) OnChange(fn func()) {
	s.mu.Lock()
	s.listeners = append(s.listeners, fn)
	s.mu.Unlock()
}

func (s *Store) changed() {
	s.mu.Lock()
	ls := append([]func(){}, s.listeners...)
	s.mu.Unlock()
	for _, fn := range ls {
		fn()
	}
}

// OpenStore opens (creating if missing) the SQLite file at path in WAL mode
// with a 5000 ms busy timeout and foreign keys on, and applies the embedded
// migrations that are not yet recorded in schema_migrations. Migrations run
// one per IMMEDIATE transaction, so several processes opening one file at
// once apply each exactly once. The parent directory must exist.
func OpenStore(ctx context.Context, file string) (*Store, error) {
	if file == "" || strings.ContainsAny(file, "?#") || file == ":memory:" {
		return nil, fmt.Errorf("linkkeysserver: database path %q: must be a file path without '?' or '#' (the server needs a real file)", file)
	}
	dsn := file + "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("linkkeysserver: opening database %s: %w", file, err)
	}
	db.SetMaxOpenConns(4)
	db.SetMaxIdleConns(4)
	s := &Store{db: db, path: file, Now: time.Now}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// Path returns the database file's path.
func (s *Store) Path() string { return s.path }

// DB returns the underlying handle, for tests and tools.
func (s *Store) DB() *sql.DB { return s.db }

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

func (s *Store) migrate(ctx context.Context) error {
	migs, err := Migrations()
	if err != nil {
		return err
	}
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT NOT NULL,
		applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')))`); err != nil {
		return fmt.Errorf("linkkeysserver: database %s: creating schema_migrations: %w (is the file a SQLite database and writable?)", s.path, err)
	}
	for _, m := range migs {
		if err := s.apply(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) apply(ctx context.Context, m Migration) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("linkkeysserver: database %s: migration %s: %w", s.path, m.Name, err)
	}
	defer tx.Rollback()
	var one int
	switch err := tx.QueryRowContext(ctx, `SELECT 1 FROM schema_migrations WHERE version = ?`, m.Version).Scan(&one); {
	case err == nil:
		return nil // already applied
	case !errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("linkkeysserver: database %s: migration %s: %w", s.path, m.Name, err)
	}
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return fmt.Errorf("linkkeysserver: database %s: applying migration %s: %w", s.path, m.Name, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name) VALUES (?, ?)`, m.Version, m.Name); err != nil {
		return fmt.Errorf("linkkeysserver: database %s: recording migration %s: %w", s.path, m.Name, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("linkkeysserver: database %s: committing migration %s: %w", s.path, m.Name, err)
	}
	return nil
}

// AppliedMigrations returns the versions recorded in schema_migrations.
func (s *Store) AppliedMigrations(ctx context.Context) ([]int, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT version FROM schema_migrations ORDER BY version`)
	if err != nil {
		return nil, fmt.Errorf("linkkeysserver: reading schema_migrations: %w", err)
	}
	defer rows.Close()
	var out []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("linkkeysserver: reading schema_migrations: %w", err)
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// rfc3339 formats t as stored: UTC, whole seconds, "Z".
func rfc3339(t time.Time) string { return t.UTC().Truncate(time.Second).Format("2006-01-02T15:04:05Z") }

// DomainKey is one row of domain_keys to insert.
type DomainKey struct {
	ID                  string // "" means a new UUIDv7
	PublicKey           []byte // 32 bytes
	PrivateKeyEncrypted []byte // nil stores NULL
	Algorithm           string // "ed25519" or "x25519"
	KeyUsage            string // "sign" or "encrypt"
	ExpiresAt           time.Time
	SignedByKeyID       *string
	KeySignature        []byte
}

// InsertDomainKey stores k and returns its id.
func (s *Store) InsertDomainKey(ctx context.Context, k DomainKey) (string, error) {
	if len(k.PublicKey) != 32 {
		return "", fmt.Errorf("linkkeysserver: domain key public key has %d bytes, want 32", len(k.PublicKey))
	}
	if k.ID == "" {
		k.ID = NewUUIDv7(s.Now())
	}
	var priv any
	if k.PrivateKeyEncrypted != nil {
		priv = k.PrivateKeyEncrypted
	}
	var sig any
	if k.KeySignature != nil {
		sig = k.KeySignature
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO domain_keys
		(id, public_key, private_key_encrypted, fingerprint, algorithm, expires_at, key_usage, signed_by_key_id, key_signature)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		k.ID, k.PublicKey, priv, linkkeys.Fingerprint(k.PublicKey), k.Algorithm, rfc3339(k.ExpiresAt), k.KeyUsage, k.SignedByKeyID, sig)
	if err != nil {
		return "", fmt.Errorf("linkkeysserver: storing domain key %s: %w", k.ID, err)
	}
	s.changed()
	return k.ID, nil
}

// ActiveDomainKeys returns the keys with expires_at after now and no
// revoked_at, ordered by created_at (then insertion order).
func (s *Store) ActiveDomainKeys(ctx context.Context) ([]linkkeys.DomainPublicKey, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, algorithm, key_usage, created_at, expires_at, public_key, fingerprint,
		key_signature, signed_by_key_id FROM domain_keys
		WHERE revoked_at IS NULL AND expires_at > ? ORDER BY created_at, rowid`, rfc3339(s.Now()))
	if err != nil {
		return nil, fmt.Errorf("linkkeysserver: listing active domain keys: %w", err)
	}
	defer rows.Close()
	keys := []linkkeys.DomainPublicKey{}
	for rows.Next() {
		var k linkkeys.DomainPublicKey
		var signedBy sql.NullString
		if err := rows.Scan(&k.KeyID, &k.Algorithm, &k.KeyUsage, &k.CreatedAt, &k.ExpiresAt, &k.PublicKey,
			&k.Fingerprint, &k.KeySignature, &signedBy); err != nil {
			return nil, fmt.Errorf("linkkeysserver: listing active domain keys: %w", err)
		}
		if signedBy.Valid {
			v := signedBy.String
			k.SignedByKeyID = &v
		}
		if len(k.KeySignature) == 0 {
			k.KeySignature = nil
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("linkkeysserver: listing active domain keys: %w", err)
	}
	return keys, nil
}

// InsertRevocation stores an issued revocation certificate and marks its
// target key revoked, in one transaction. An empty ID means a new UUIDv7.
func (s *Store) InsertRevocation(ctx context.Context, r linkkeys.Revocation) error {
	revokedAt, err := time.Parse(time.RFC3339, r.RevokedAt)
	if err != nil {
		return fmt.Errorf("linkkeysserver: revocation of %s: revoked_at %q is not RFC 3339: %w", r.TargetKeyID, r.RevokedAt, err)
	}
	sigs, err := linkkeys.EncodePayload(r.Signatures)
	if err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("linkkeysserver: storing revocation of %s: %w", r.TargetKeyID, err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO issued_revocations (id, target_key_id, target_fingerprint, revoked_at, signatures)
		VALUES (?, ?, ?, ?, ?)`, NewUUIDv7(s.Now()), r.TargetKeyID, r.TargetFingerprint, rfc3339(revokedAt), sigs); err != nil {
		return fmt.Errorf("linkkeysserver: storing revocation of %s: %w", r.TargetKeyID, err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE domain_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`,
		rfc3339(revokedAt), r.TargetKeyID); err != nil {
		return fmt.Errorf("linkkeysserver: marking key %s revoked: %w", r.TargetKeyID, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("linkkeysserver: storing revocation of %s: %w", r.TargetKeyID, err)
	}
	s.changed()
	return nil
}

// RevocationsSince returns the issued revocations with revoked_at >= since,
// oldest first.
func (s *Store) RevocationsSince(ctx context.Context, since time.Time) ([]linkkeys.Revocation, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT target_key_id, target_fingerprint, revoked_at, signatures
		FROM issued_revocations WHERE revoked_at >= ? ORDER BY revoked_at, rowid`, rfc3339(since))
	if err != nil {
		return nil, fmt.Errorf("linkkeysserver: listing revocations: %w", err)
	}
	defer rows.Close()
	out := []linkkeys.Revocation{}
	for rows.Next() {
		var r linkkeys.Revocation
		var sigs []byte
		if err := rows.Scan(&r.TargetKeyID, &r.TargetFingerprint, &r.RevokedAt, &sigs); err != nil {
			return nil, fmt.Errorf("linkkeysserver: listing revocations: %w", err)
		}
		if err := linkkeys.DecodePayload(sigs, &r.Signatures); err != nil {
			return nil, fmt.Errorf("linkkeysserver: revocation of %s: stored signatures: %w", r.TargetKeyID, err)
		}
		if r.Signatures == nil {
			r.Signatures = []linkkeys.ClaimSignature{}
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("linkkeysserver: listing revocations: %w", err)
	}
	return out, nil
}

// HasRevocationsSince reports whether a revocation with revoked_at >= since
// exists.
func (s *Store) HasRevocationsSince(ctx context.Context, since time.Time) (bool, error) {
	var one int
	err := s.db.QueryRowContext(ctx, `SELECT 1 FROM issued_revocations WHERE revoked_at >= ? LIMIT 1`, rfc3339(since)).Scan(&one)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	default:
		return false, fmt.Errorf("linkkeysserver: checking recent revocations: %w", err)
	}
}

// ServerKeyOptions says how PrepareServerKey picks the server's TLS key.
type ServerKeyOptions struct {
	// Passphrase (DOMAIN_KEY_PASSPHRASE) encrypts stored private keys. When
	// set, the first active signing key whose private key is stored is
	// reused (so the fingerprint survives restarts); when none exists a new
	// key is stored encrypted. When empty, a new key is made on every start
	// and its private key is kept in memory only (NULL in the database).
	Passphrase []byte
	// DontStore leaves the database untouched apart from retiring earlier
	// memory-only keys: the key is made fresh and kept in memory, like the
	// upstream load-test server, so get-domain-keys on a fresh database
	// returns an empty list (--empty-domain-keys).
	DontStore bool
	// Lifetime is the stored key's validity (0 means two years).
	Lifetime time.Duration
}

// PrepareServerKey returns the Ed25519 key the server presents in TLS and
// records it in domain_keys as an active signing key (see
// ServerKeyOptions). Signing keys stored earlier without a private key
// (from runs without a passphrase) can never be used again; they are
// retired by setting their expires_at to now, so the active list does not
// grow run after run.
func (s *Store) PrepareServerKey(ctx context.Context, opt ServerKeyOptions) (ed25519.PrivateKey, error) {
	now := s.Now()
	if res, err := s.db.ExecContext(ctx, `UPDATE domain_keys SET expires_at = ?
		WHERE private_key_encrypted IS NULL AND key_usage = 'sign' AND revoked_at IS NULL AND expires_at > ?`,
		rfc3339(now), rfc3339(now)); err != nil {
		return nil, fmt.Errorf("linkkeysserver: retiring memory-only keys of earlier runs: %w", err)
	} else if n, _ := res.RowsAffected(); n > 0 {
		s.changed()
	}
	if !opt.DontStore && len(opt.Passphrase) > 0 {
		rows, err := s.db.QueryContext(ctx, `SELECT id, private_key_encrypted, public_key FROM domain_keys
			WHERE revoked_at IS NULL AND expires_at > ? AND key_usage = 'sign' AND algorithm = 'ed25519'
			AND private_key_encrypted IS NOT NULL ORDER BY created_at, rowid LIMIT 1`, rfc3339(now))
		if err != nil {
			return nil, fmt.Errorf("linkkeysserver: looking up the stored signing key: %w", err)
		}
		var id string
		var blob, pub []byte
		found := rows.Next()
		if found {
			err = rows.Scan(&id, &blob, &pub)
		}
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("linkkeysserver: looking up the stored signing key: %w", err)
		}
		if found {
			seed, err := DecryptPrivateKey(blob, opt.Passphrase)
			if err != nil {
				return nil, fmt.Errorf("linkkeysserver: stored signing key %s: %w", id, err)
			}
			if len(seed) != ed25519.SeedSize {
				return nil, fmt.Errorf("linkkeysserver: stored signing key %s: decrypted key has %d bytes, want %d", id, len(seed), ed25519.SeedSize)
			}
			key := ed25519.NewKeyFromSeed(seed)
			if !ed25519.PublicKey(pub).Equal(key.Public()) {
				return nil, fmt.Errorf("linkkeysserver: stored signing key %s: private key does not match its public key; the row is corrupt", id)
			}
			return key, nil
		}
	}
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("linkkeysserver: generating the server key: %w", err)
	}
	if opt.DontStore {
		return key, nil
	}
	var blob []byte
	if len(opt.Passphrase) > 0 {
		if blob, err = EncryptPrivateKey(key.Seed(), opt.Passphrase); err != nil {
			return nil, err
		}
	}
	life := opt.Lifetime
	if life <= 0 {
		life = 2 * 365 * 24 * time.Hour
	}
	if _, err := s.InsertDomainKey(ctx, DomainKey{
		PublicKey:           key.Public().(ed25519.PublicKey),
		PrivateKeyEncrypted: blob,
		Algorithm:           "ed25519",
		KeyUsage:            "sign",
		ExpiresAt:           now.Add(life),
	}); err != nil {
		return nil, err
	}
	return key, nil
}

// NewUUIDv7 returns a random RFC 9562 version-7 UUID for time t, the id form
// of LinkKeys rows.
func NewUUIDv7(t time.Time) string {
	var u [16]byte
	_, _ = rand.Read(u[6:])
	ms := uint64(t.UnixMilli())
	var ts [8]byte
	binary.BigEndian.PutUint64(ts[:], ms)
	copy(u[:6], ts[2:])
	u[6] = 0x70 | u[6]&0x0f
	u[8] = 0x80 | u[8]&0x3f
	const hexd = "0123456789abcdef"
	out := make([]byte, 0, 36)
	for i, b := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			out = append(out, '-')
		}
		out = append(out, hexd[b>>4], hexd[b&15])
	}
	return string(out)
}
