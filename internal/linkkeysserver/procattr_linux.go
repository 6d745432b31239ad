//go:build linux

package linkkeysserver

import "syscall"

// newChildProcAttr puts a child in its own process group (a terminal's
// Ctrl-C reaches only the parent, which forwards it) and has the kernel send
// it SIGTERM if the parent dies.
func newChildProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
