package main

import (
	"encoding/json"
	"os"

	"github.com/loadproof/loadproof/internal/machine"
)

func main() {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	enc.Encode(machine.Collect("KEYCAST_", "HANDLER_CACHE_SIZE", "GOMAXPROCS"))
}
