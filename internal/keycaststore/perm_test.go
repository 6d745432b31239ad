package keycaststore_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/loadproof/loadproof/internal/keycaststore"
)

// TestSQLiteFilesArePrivate: the database holds password hashes and sealed keys, so the file and
// its -wal and -shm companions are 0600 whatever the umask and the directory's mode, both when
// Open creates the file and when it finds one with a looser mode (from an older version).
func TestSQLiteFilesArePrivate(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Unix permission bits")
	}
	for _, existing := range []bool{false, true} {
		dir := t.TempDir()
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "keycast.sqlite3")
		if existing {
			for _, p := range []string{path, path + "-wal", path + "-shm"} {
				if err := os.WriteFile(p, nil, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(p, 0o644); err != nil { // whatever the umask
					t.Fatal(err)
				}
			}
		}
		s, err := keycaststore.Open(context.Background(), path, keycaststore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.EnsureTenant(context.Background(), "perm.test", "perm.test"); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{path, path + "-wal", path + "-shm"} {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatalf("existing=%v: %v (WAL mode keeps -wal and -shm while open)", existing, err)
			}
			if m := fi.Mode().Perm(); m != 0o600 {
				t.Errorf("existing=%v: %s has mode %#o, want 0600", existing, filepath.Base(p), m)
			}
		}
		s.Close()
	}
}
