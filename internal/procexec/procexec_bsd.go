//go:build unix && !linux

package procexec

import (
	"os/exec"
	"syscall"
)

// tie hands the child the parent pipe (there is no parent-death signal here).
func tie(cmd *exec.Cmd, opt Options) error {
	if opt.NewGroup {
		if cmd.SysProcAttr == nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		cmd.SysProcAttr.Setpgid = true
	}
	return passPipe(cmd, opt.signal())
}
