// Command linkkeys-loadtest is a thin main over loadproof's command tree (internal/cli).
package main

import (
	"os"

	"github.com/loadproof/loadproof/internal/cli"
)

func main() { os.Exit(cli.Main(cli.LinkKeys)) }
