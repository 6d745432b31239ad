package procexec

import (
	"os"
	"os/exec"
	"syscall"
)

// tie names this process in ParentEnv, for the child to watch. NewGroup is ignored.
func tie(cmd *exec.Cmd, opt Options) error {
	setEnv(cmd, os.Getpid(), opt.signal())
	return nil
}

// watch waits on the parent's process handle (Windows lets a process with SYNCHRONIZE access wait
// for one that is not its child) and exits when it ends; Windows has no signals to deliver instead.
// A parent that cannot be opened has already gone.
func watch(parent int, _ syscall.Signal) {
	p, err := os.FindProcess(parent)
	if err != nil {
		os.Exit(1)
	}
	go func() {
		if _, err := p.Wait(); err != nil {
			return // cannot tell when it ends: leave this process alone
		}
		os.Exit(1)
	}()
}
