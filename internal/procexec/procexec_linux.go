package procexec

import (
	"os/exec"
	"syscall"
)

// tie asks the kernel to signal the child when this process dies.
func tie(cmd *exec.Cmd, opt Options) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = opt.signal()
	if opt.NewGroup {
		cmd.SysProcAttr.Setpgid = true
	}
	return nil
}
