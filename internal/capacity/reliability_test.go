package capacity

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/keycastload"
	"github.com/loadproof/loadproof/internal/keycastresult"
)

// unwritableEmptyDir returns an existing, empty directory in which no file can be created, or skips:
// a 0500 directory for an ordinary user; for root (who may write anywhere on a normal file system),
// an empty directory of a pseudo file system that refuses new files.
func unwritableEmptyDir(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		dir := filepath.Join(t.TempDir(), "ro")
		if err := os.Mkdir(dir, 0o500); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(dir, 0o700) })
		return dir
	}
	for _, dir := range []string{"/sys/fs/pstore", "/sys/fs/bpf", "/sys/kernel/debug", "/sys/fs/fuse/connections", "/proc/fs/nfsd"} {
		if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
			continue
		}
		if f, err := os.CreateTemp(dir, "probe-*"); err == nil {
			f.Close()
			os.Remove(f.Name())
			continue
		}
		return dir
	}
	t.Skip("running as root with no empty read-only directory to write into")
	return ""
}

// TestUnwritableEvidenceDirectoryIsRefusedBeforeAnyPhase is issue 13 item 4: an evidence directory
// that could not be written was found out only when the first phase's results were written, after the
// phase had loaded the target. It is now refused before the first phase.
func TestUnwritableEvidenceDirectoryIsRefusedBeforeAnyPhase(t *testing.T) {
	p, _ := setup(t)
	dir := unwritableEmptyDir(t)
	r := &fakeRunner{}
	ev, err := Execute(context.Background(), p, opts(dir, r))
	if len(r.runs) != 0 {
		t.Fatalf("%d phases ran before the evidence directory was found unwritable (err %v)", len(r.runs), err)
	}
	if ev != nil || !errors.Is(err, ErrOutputNotWritable) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("evidence %v, error %v", ev, err)
	}
}

// TestPhaseWhoseResultsCannotBeWrittenIsNotCalledUnrun is issue 13 item 4: on a full disk the last
// phase was reported as "could not run" although it had run.
func TestPhaseWhoseResultsCannotBeWrittenIsNotCalledUnrun(t *testing.T) {
	p, out := setup(t)
	target := PhaseFileName(2, p.Phases[2].Name)
	writeFile = func(path string, data []byte, perm fs.FileMode) error {
		if filepath.Base(path) == target {
			return &fs.PathError{Op: "write", Path: path, Err: syscall.ENOSPC}
		}
		return os.WriteFile(path, data, perm)
	}
	defer func() { writeFile = realWriteFile }()
	r := &fakeRunner{}
	var progress strings.Builder
	o := opts(out, r)
	o.Progress = &progress
	ev, err := Execute(context.Background(), p, o)
	if !errors.Is(err, ErrIncomplete) || len(r.runs) != 3 {
		t.Fatalf("error %v after %d phases", err, len(r.runs))
	}
	ph := ev.Phases[2]
	if ph.Error == nil || strings.Contains(*ph.Error, "could not run") || !strings.Contains(*ph.Error, "ran, but its results could not be written") {
		t.Fatalf("phase error %q", *ph.Error)
	}
	if strings.Contains(progress.String(), "soak could not run") || strings.Contains(err.Error(), "could not run:") {
		t.Fatalf("a phase that ran is reported as not run:\n%s\nerror: %v", progress.String(), err)
	}
	if ph.Results == nil || ph.ResultsFile != "" || ph.Passed {
		t.Fatalf("phase %+v: its figures belong in the evidence, its file does not exist", ph)
	}
}

// TestInterruptedRunSaysSoFirst is issue 13 item 4: an interrupted run's error began with
// upstream's "one or more capacity phases exceeded their predeclared limits", which no phase had.
func TestInterruptedRunSaysSoFirst(t *testing.T) {
	p, out := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	partial := results(40, 0, 0, time.Millisecond)
	partial.Stop = &keycastresult.StopEvent{Reason: "signal", ElapsedSecs: 0.4, At: "2025-12-10T12:00:00.4Z"}
	r := &fakeRunner{results: map[int]*keycastresult.Results{1: partial}, hook: func(_ context.Context, run PhaseRun) {
		if run.Index == 1 {
			cancel()
		}
	}}
	_, err := Execute(ctx, p, opts(out, r))
	if !errors.Is(err, ErrIncomplete) || !errors.Is(err, ErrLimitsExceeded) {
		t.Fatalf("error %v", err)
	}
	if msg := err.Error(); strings.Contains(msg, "exceeded") || !strings.HasPrefix(msg, "capacity: the profile could not run to completion: ") || !strings.Contains(msg, "interrupted by a signal") {
		t.Fatalf("error %q", msg)
	}
	// A phase error keeps upstream's sentence, after the reason.
	p2, out2 := setup(t)
	p2.UsersFile = filepath.Join(filepath.Dir(out2), "missing.json")
	_, err = Execute(context.Background(), p2, opts(out2, &fakeRunner{}))
	if msg := err.Error(); !strings.HasPrefix(msg, "capacity: the profile could not run to completion: phase \"ramp\" could not run: ") || !strings.Contains(msg, "exceeded their predeclared limits") {
		t.Fatalf("phase error %q", msg)
	}
}

func TestDescribeRunErrorNamesUnusableUsersAndCertificates(t *testing.T) {
	users := []keycast.TestUser{{Pubkey: strings.Repeat("a", 64), UcanToken: "a\r\nb"}}
	err := keycastload.CheckUsers(users, "u.json")
	if got := describeRunError(err); !strings.Contains(got, "user 0 of the users file has an unusable ucan_token") || strings.Contains(got, "\r") {
		t.Errorf("users: %q", got)
	}
	certErr := fmt.Errorf("keycastload: target cannot be reached: %w", &tls.CertificateVerificationError{Err: errors.New("x509: unknown authority")})
	if got := describeRunError(certErr); !strings.Contains(got, "--ca-cert") {
		t.Errorf("certificate: %q", got)
	}
}
