package linkkeysload

import (
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// TestProcessStopped: a child stopped with SIGSTOP reads as stopped until SIGCONT; this (running)
// process never does, and neither does a pid that cannot exist.
func TestProcessStopped(t *testing.T) {
	if processStopped(os.Getpid()) || processStopped(0) || processStopped(1<<30) {
		t.Fatal("a running, absent or impossible process reads as stopped")
	}
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc:", err)
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep binary:", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	waitFor := func(want bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for processStopped(cmd.Process.Pid) != want {
			if time.Now().After(deadline) {
				t.Fatalf("child %d: stopped should be %v by now", cmd.Process.Pid, want)
			}
			runtime.Gosched()
		}
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitFor(true)
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitFor(false)
	// Not the server: a stopped process that does not listen on the target's port is never read
	// as a stopped server.
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitFor(true)
	if why := serverStopped(Target{PID: uint32(cmd.Process.Pid), Addr: netip.MustParseAddrPort("127.0.0.1:9")}); why != "" {
		t.Fatalf("a stopped process on no port: %q", why)
	}
}
