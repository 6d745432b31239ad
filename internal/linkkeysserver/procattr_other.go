//go:build !linux

package linkkeysserver

import "syscall"

// newChildProcAttr puts a child in its own process group, so a terminal's
// Ctrl-C reaches only the parent, which forwards it.
func newChildProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
