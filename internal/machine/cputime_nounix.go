//go:build !unix

package machine

import "time"

// ProcessCPU is 0 (unknown) where getrusage is missing: callers then report no CPU figure.
func ProcessCPU() time.Duration { return 0 }
