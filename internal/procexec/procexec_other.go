//go:build !unix && !windows

package procexec

import (
	"os/exec"
	"syscall"
)

// tie does nothing: on this system a child may outlive its parent.
func tie(*exec.Cmd, Options) error { return nil }

func watch(int, syscall.Signal) {}
