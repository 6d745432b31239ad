package keycastload

import "github.com/loadproof/loadproof/internal/machine"

// processCPU is this process's CPU time in nanoseconds, for the benchmarks' cpu-ns/op (0 where it
// cannot be read).
func processCPU() int64 { return int64(machine.ProcessCPU()) }
