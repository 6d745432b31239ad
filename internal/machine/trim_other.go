//go:build !linux

package machine

import (
	"errors"
	"runtime"
)

// TrimCodePages is Linux-only; here it does nothing.
func TrimCodePages() (uint64, error) {
	return 0, errors.New("machine: trimming code pages is supported on Linux only, not " + runtime.GOOS)
}
