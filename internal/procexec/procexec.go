// Package procexec starts child processes that do not outlive the process that started them: the
// fan-out workers of a load run, the reference servers of smoke and profile runs, the children of a
// multi-process server. A child left running after its parent crashed would hold ports and keep
// loading the machine, and the next run's figures would be wrong.
//
// Start ties the child to this process before starting it. On Linux the kernel does it: the child
// gets Options.Signal when its parent dies (prctl PR_SET_PDEATHSIG). Elsewhere the child must take
// part, through ParentEnv: on other Unix systems Start hands the child the read end of a pipe whose
// write end only this process holds, and WatchParent, called early in the child's main, reads it;
// end of file means the parent has gone, whatever the way it went, and the child sends the agreed
// signal to itself. On Windows the child waits on its parent's process handle and exits. Every
// loadproof binary calls WatchParent in cli.Main; a child that does not may be orphaned on those
// systems, and on systems that are neither Unix nor Windows any child may be.
//
// On Linux the parent-death signal follows the thread that started the child, not the whole
// process; Go ends a thread only when a goroutine locked to it (runtime.LockOSThread) returns
// without unlocking, which nothing in loadproof does.
package procexec

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// ParentEnv is the environment variable through which Start, on a system without a parent-death
// signal, tells a child what to watch: "<fd>:<signal number>" on Unix (the pipe's descriptor),
// "<pid>:<signal number>" on Windows. WatchParent removes it from the child's environment, so the
// child's own children do not inherit it.
const ParentEnv = "LOADPROOF_PARENT"

// Options say how a child started with Start is tied to this process. The zero value kills the
// child when this process dies.
type Options struct {
	// Signal is what the child receives when this process dies; 0 means SIGKILL. A server child
	// gets SIGTERM, so it shuts down cleanly.
	Signal syscall.Signal
	// NewGroup puts the child in its own process group, so a terminal's Ctrl-C reaches only this
	// process, which forwards it. It has no effect on Windows.
	NewGroup bool
}

func (o Options) signal() syscall.Signal {
	if o.Signal == 0 {
		return syscall.SIGKILL
	}
	return o.Signal
}

// Command is exec.Command for exe, where an empty exe means this process's own executable, the
// usual case: loadproof re-executes itself for workers and servers. Start the result with Start.
func Command(exe string, args ...string) (*exec.Cmd, error) {
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("procexec: finding this program's executable to start it again: %w", err)
		}
	}
	return exec.Command(exe, args...), nil
}

// Start starts cmd so that the child does not outlive this process (see the package doc for how,
// on each system). It sets the cmd.SysProcAttr fields it needs, keeping the others, and on systems
// without a parent-death signal adds ParentEnv to cmd's environment and a descriptor to
// cmd.ExtraFiles; set cmd.Env and cmd.ExtraFiles before calling it.
func Start(cmd *exec.Cmd, opt Options) error {
	if err := tie(cmd, opt); err != nil {
		return err
	}
	return cmd.Start()
}

// setEnv adds ParentEnv=<n>:<sig> to cmd's environment.
func setEnv(cmd *exec.Cmd, n int, sig syscall.Signal) {
	cmd.Env = append(cmd.Environ(), fmt.Sprintf("%s=%d:%d", ParentEnv, n, int(sig)))
}

// fromEnv reads and removes ParentEnv; ok is false when it is absent or malformed.
func fromEnv() (n int, sig syscall.Signal, ok bool) {
	v, set := os.LookupEnv(ParentEnv)
	if !set {
		return 0, 0, false
	}
	os.Unsetenv(ParentEnv)
	a, b, found := strings.Cut(v, ":")
	if !found {
		return 0, 0, false
	}
	n, err1 := strconv.Atoi(a)
	s, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || n < 0 || s <= 0 {
		return 0, 0, false
	}
	return n, syscall.Signal(s), true
}

// WatchParent is called early in a child's main. When this process was started by Start on a
// system without a parent-death signal, it starts a goroutine that waits for the parent to end and
// then delivers the agreed signal to this process (so its usual signal handling runs) or, on
// Windows, exits with status 1. Otherwise it does nothing, and it is always safe to call.
func WatchParent() {
	n, sig, ok := fromEnv()
	if !ok {
		return
	}
	watch(n, sig)
}
