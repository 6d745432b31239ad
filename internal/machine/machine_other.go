//go:build !unix && !windows

package machine

import (
	"errors"
	"runtime"
)

// collectOS leaves every system field unknown.
func collectOS(*Record) {}

func rssBytes() (uint64, bool) { return 0, false }

func rssSplit() (RSS, bool) { return RSS{}, false }

var errNoNofile = errors.New("machine: open-file limits are not supported on " + runtime.GOOS)

func nofile() (soft, hard uint64, err error) { return 0, 0, errNoNofile }

func raiseNofile() (uint64, error) { return 0, errNoNofile }
