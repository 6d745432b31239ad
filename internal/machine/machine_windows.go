package machine

import (
	"errors"
	"fmt"

	"golang.org/x/sys/windows"
)

// collectOS fills the Windows version as the kernel; CPU model and memory stay unknown, and the
// open-file, somaxconn and port-range fields have no Windows counterpart.
func collectOS(r *Record) {
	v := windows.RtlGetVersion()
	r.Kernel = fmt.Sprintf("%d.%d.%d", v.MajorVersion, v.MinorVersion, v.BuildNumber)
}

func rssBytes() (uint64, bool) { return 0, false }

func rssSplit() (RSS, bool) { return RSS{}, false }

var errNoNofile = errors.New("machine: Windows has no open-file limit (RLIMIT_NOFILE); sockets are bounded by memory")

func nofile() (soft, hard uint64, err error) { return 0, 0, errNoNofile }

func raiseNofile() (uint64, error) { return 0, errNoNofile }
