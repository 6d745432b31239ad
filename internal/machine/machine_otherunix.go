//go:build unix && !linux && !darwin && !freebsd

package machine

// collectOS fills the kernel release and open-file limits; the rest stays unknown on this system.
func collectOS(r *Record) { collectUnix(r) }

func nofileCap() uint64 { return 0 }

func rssBytes() (uint64, bool) { return 0, false }

func rssSplit() (RSS, bool) { return RSS{}, false }
