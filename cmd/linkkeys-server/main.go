// Command linkkeys-server is the LinkKeys reference server alone: the same flags, environment,
// output and --processes children as `linkkeys-loadtest server` (both run internal/linkkeysmain),
// in a binary that links only the server side, so less of it is paged in (docs/benchmarks.md,
// LinkKeys server memory).
package main

import (
	"os"

	"github.com/loadproof/loadproof/internal/linkkeysmain"
)

func main() { os.Exit(linkkeysmain.Main(os.Args[1:])) }
