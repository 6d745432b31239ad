//go:build linux && e2e

package faults_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/capacity"
	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/keycastserver"
)

// The evidence scenarios put a capacity run's evidence directory on a file system that refuses
// writes: a read-only tmpfs, and a tmpfs that fills up while the run is going.

// mountTmpfs mounts a tmpfs of size bytes on dir (read-only when ro) and unmounts it when the test
// ends. Mounting needs root (CAP_SYS_ADMIN): where it is refused the test is skipped with the
// reason, except under CI=true, where a scenario that cannot be set up is a failure.
func mountTmpfs(t *testing.T, dir string, size int, ro bool) {
	t.Helper()
	var flags uintptr = syscall.MS_NOSUID | syscall.MS_NODEV
	if ro {
		flags |= syscall.MS_RDONLY
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", flags, "size="+strconv.Itoa(size)+",mode=0755"); err != nil {
		msg := "cannot mount a tmpfs on " + dir + " (needs root or CAP_SYS_ADMIN): " + err.Error()
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s; under CI=true the file-system scenarios must run", msg)
		}
		t.Skip(msg)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			// Still busy (a file left open by a failing test): detach it.
			_ = syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
}

// writePlan writes the six one-second rehearsal phases against url as a plan file.
func writePlan(t *testing.T, url, users string) string {
	t.Helper()
	p := capacity.RehearsalPlan(capacity.RehearsalOptions{Name: "faults", URL: url, UsersFile: users, PhaseSeconds: 1, SpikeConcurrency: 2})
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestEvidenceDirectoryReadOnly: a read-only evidence directory (existing and empty, or to be
// created inside a read-only file system) is refused before any load: exit 2, the error names the
// directory and the cause, and the server received no request. So is one that cannot be created
// because a file stands in its path, which needs no mount. Before the fix a directory that could
// not be created exited 3 ("could not run") instead of 2.
func TestEvidenceDirectoryReadOnly(t *testing.T) {
	t.Parallel()
	s := startKeycast(t, keycastserver.Config{}, 1)
	plan := writePlan(t, s.URL, s.usersFile)
	refused := func(t *testing.T, dir, cause string) {
		t.Helper()
		before := s.counter(t, keycast.MetricHTTPRPCRequests)
		r := runCLI(t, 30*time.Second, "keycast", "capacity", "--plan", plan, "--output", dir)
		if r.code != 2 || !strings.Contains(r.stderr, dir) || !strings.Contains(r.stderr, cause) {
			t.Errorf("--output %s: want exit 2 naming the directory and %q: %s", dir, cause, r)
		}
		if got := s.counter(t, keycast.MetricHTTPRPCRequests) - before; got != 0 {
			t.Errorf("--output %s: the server received %v requests before the directory was refused", dir, got)
		}
	}
	t.Run("not creatable", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "file")
		if err := os.WriteFile(file, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		refused(t, filepath.Join(file, "evidence"), "not a directory")
	})
	t.Run("read-only tmpfs", func(t *testing.T) {
		mnt := t.TempDir()
		mountTmpfs(t, mnt, 64<<10, true)
		refused(t, mnt, "read-only file system")
		refused(t, filepath.Join(mnt, "evidence"), "read-only file system")
	})
}

// fill writes a file into dir until the file system is full.
func fill(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Errorf("filling %s: %v", dir, err)
		return
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Errorf("filling %s: %v", dir, err)
			}
			return
		}
	}
}

// TestEvidenceDirectoryFills: the evidence directory's file system fills up after the first
// phase's results were written. The run stops with a clear error (exit 3, "no space left on
// device", naming the file it could not write), and the file written before is intact.
func TestEvidenceDirectoryFills(t *testing.T) {
	t.Parallel()
	s := startKeycast(t, keycastserver.Config{}, 1)
	plan := writePlan(t, s.URL, s.usersFile)
	mnt := t.TempDir()
	mountTmpfs(t, mnt, 1<<20, false)
	dir := filepath.Join(mnt, "evidence")
	var filled atomic.Bool
	hook := func(p []byte) {
		// The second phase starts once the first one's results are on disk: fill the disk now.
		if !filled.Load() && strings.Contains(string(p), "capacity: phase 2/6") {
			filled.Store(true)
			fill(t, mnt)
		}
	}
	r := runCLIWith(t, t.Context(), 60*time.Second, hook, "keycast", "capacity", "--plan", plan, "--output", dir)
	if !filled.Load() {
		t.Fatalf("the second phase never started: %s", r)
	}
	if r.code != 3 || !strings.Contains(r.stderr, "no space left on device") {
		t.Errorf("want exit 3 and ENOSPC: %s", r)
	}
	first := filepath.Join(dir, capacity.PhaseFileName(0, "faults "+string(capacity.RequiredKinds[0])))
	res := readKC(t, first)
	checkKCTotals(t, res)
	if res.Summary.TotalRequests == 0 || res.Summary.SuccessfulRequests != res.Summary.TotalRequests {
		t.Errorf("the first phase's results %s: %+v", first, res.Summary)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != filepath.Base(first) {
			t.Errorf("%s holds %s besides the first phase's results", dir, e.Name())
		}
	}
}
