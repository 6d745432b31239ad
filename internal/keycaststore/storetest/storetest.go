// Package storetest gives tests a fresh, private PostgreSQL schema (or an SQLite file) to run the
// Keycast store against, so that parallel test runs never collide.
//
// PostgreSQL is found at $KEYCAST_TEST_DATABASE_URL, default
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable. When it does not answer, tests that
// need it fail when CI=true (the CI script starts PostgreSQL) and are skipped otherwise.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultPostgresURL is used when KEYCAST_TEST_DATABASE_URL is unset.
const DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// SQLiteURL returns a DATABASE_URL for a new SQLite file in a test temporary directory.
func SQLiteURL(t testing.TB) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "keycast.sqlite3")
}

// PostgresURL creates a schema with a random name, drops it (CASCADE) when the test ends, and
// returns a DATABASE_URL whose connections use that schema as search_path.
func PostgresURL(t testing.TB) string {
	t.Helper()
	base := os.Getenv("KEYCAST_TEST_DATABASE_URL")
	if base == "" {
		base = DefaultPostgresURL
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		unreachable(t, base, err)
		return ""
	}
	defer conn.Close(context.Background())
	var b [6]byte
	rand.Read(b[:])
	schema := "kctest_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("storetest: creating schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Logf("storetest: could not drop schema %s: %v", schema, err)
			return
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
			t.Logf("storetest: could not drop schema %s: %v", schema, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("storetest: KEYCAST_TEST_DATABASE_URL %q is not a URL: %v", base, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

func unreachable(t testing.TB, base string, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("storetest: PostgreSQL at %s is unreachable and CI=true: %v (start PostgreSQL or set KEYCAST_TEST_DATABASE_URL)", base, err)
	}
	t.Skipf("storetest: PostgreSQL at %s is unreachable, skipping: %v (set KEYCAST_TEST_DATABASE_URL or start PostgreSQL; CI=true makes this fail)", base, err)
}

// Backends returns the two back ends as (name, DATABASE_URL) pairs for table-driven tests: the
// PostgreSQL URL is produced lazily so that an unreachable server skips only its subtest.
func Backends() []Backend {
	return []Backend{{Name: "sqlite", URL: SQLiteURL}, {Name: "postgres", URL: PostgresURL}}
}

// Backend is one database back end for tests.
type Backend struct {
	Name string
	URL  func(t testing.TB) string
}
