//go:build !unix && !windows

package machine

import (
	"errors"
	"runtime"
)

// collectOS leaves every system field unknown.
func collectOS(*Record) {}

func rssBytes() (uint64, bool) { return 0, false }

func raiseNofile() (uint64, error) {
	return 0, errors.New("machine: raising the open-file limit is not supported on " + runtime.GOOS)
}
