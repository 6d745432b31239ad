//go:build !unix

package linkkeysload

import "syscall"

// errnoName is "": Detail then names the error by number.
func errnoName(syscall.Errno) string { return "" }
