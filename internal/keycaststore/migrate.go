package keycaststore

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

//go:embed migrations
var migrationFS embed.FS

// Migration is one embedded schema step.
type Migration struct {
	Version int    // from the file name's numeric prefix
	Name    string // file name, e.g. "0001_initial.sql"
	SQL     string
}

// Migrations returns the embedded migrations of a dialect in version order. Both dialects carry
// the same versions with the same meaning.
func Migrations(d Dialect) ([]Migration, error) {
	dir := path.Join("migrations", d.String())
	entries, err := fs.ReadDir(migrationFS, dir)
	if err != nil {
		return nil, fmt.Errorf("keycaststore: reading embedded migrations %s: %w", dir, err)
	}
	var out []Migration
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".sql") {
			continue
		}
		prefix, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(prefix)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("keycaststore: migration file %s has no numeric version prefix like 0001_", name)
		}
		b, err := fs.ReadFile(migrationFS, path.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("keycaststore: reading migration %s: %w", name, err)
		}
		out = append(out, Migration{Version: v, Name: name, SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			return nil, fmt.Errorf("keycaststore: migrations %s and %s share version %d", out[i-1].Name, out[i].Name, out[i].Version)
		}
	}
	return out, nil
}

// migrationLockKey is the PostgreSQL advisory lock that serializes concurrent migrators.
const migrationLockKey = 0x6b657963617374 // "keycast"

// migrate applies pending migrations, all in one transaction, recording each in
// schema_migrations. Concurrent starters are serialized by an advisory lock (PostgreSQL) or the
// immediate write lock (SQLite), so exactly one applies each step.
func migrate(ctx context.Context, db *sql.DB, d Dialect) error {
	ms, err := Migrations(d)
	if err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("keycaststore: starting migration transaction (%s): %w", d, err)
	}
	defer tx.Rollback()
	if d == Postgres {
		if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", int64(migrationLockKey)); err != nil {
			return fmt.Errorf("keycaststore: taking the migration lock: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL)"); err != nil {
		return fmt.Errorf("keycaststore: creating schema_migrations (%s): %w", d, err)
	}
	applied := map[int]bool{}
	rows, err := tx.QueryContext(ctx, "SELECT version FROM schema_migrations")
	if err != nil {
		return fmt.Errorf("keycaststore: reading schema_migrations (%s): %w", d, err)
	}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return fmt.Errorf("keycaststore: reading schema_migrations (%s): %w", d, err)
		}
		applied[v] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("keycaststore: reading schema_migrations (%s): %w", d, err)
	}
	latest := ms[len(ms)-1].Version
	for v := range applied {
		if v > latest {
			return fmt.Errorf("keycaststore: the database is at schema version %d but this build knows only up to %d; use a newer build or a fresh database", v, latest)
		}
	}
	insert := rebind(d, "INSERT INTO schema_migrations (version, name) VALUES (?, ?)")
	for _, m := range ms {
		if applied[m.Version] {
			continue
		}
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return fmt.Errorf("keycaststore: applying migration %s (%s): %w", m.Name, d, err)
		}
		if _, err := tx.ExecContext(ctx, insert, m.Version, m.Name); err != nil {
			return fmt.Errorf("keycaststore: recording migration %s (%s): %w", m.Name, d, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("keycaststore: committing migrations (%s): %w", d, err)
	}
	return nil
}
