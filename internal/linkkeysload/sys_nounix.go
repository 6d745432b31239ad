//go:build !unix

package linkkeysload

import (
	"syscall"
	"time"
)

// processCPU is 0 (unknown): the figure is read with getrusage, a Unix call.
func processCPU() time.Duration { return 0 }

// errnoName is "": Detail then names the error by number.
func errnoName(syscall.Errno) string { return "" }
