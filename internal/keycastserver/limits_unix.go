//go:build unix

package keycastserver

import (
	"errors"
	"syscall"
)

// openFileLimit returns the process's soft limit on open files (RLIMIT_NOFILE).
func openFileLimit() (uint64, bool) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == 0 {
		return 0, false
	}
	return uint64(rl.Cur), true
}

// isFDExhausted reports an accept failure for lack of file descriptors.
func isFDExhausted(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}
