//go:build !unix

package linkkeys

import "time"

// processCPU is 0 where getrusage is missing: the benchmarks then report no cpu-ns/op.
func processCPU() time.Duration { return 0 }
