package cli

import (
	"encoding/json"

	"github.com/spf13/cobra"

	"github.com/loadproof/loadproof/internal/machine"
)

// newMachineCmd prints the machine record (internal/machine) as JSON, for benchmark scripts to
// stamp their output with; settings are the environment variables with the given prefixes.
func newMachineCmd(env *Env) *cobra.Command {
	var prefixes []string
	c := &cobra.Command{
		Use:    "machine",
		Short:  "Print the machine record (CPU, memory, kernel, limits, versions) as JSON",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			enc := json.NewEncoder(env.Stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(machine.Collect(prefixes...))
		},
	}
	c.Flags().StringSliceVar(&prefixes, "settings", []string{"TCP_", "PUBLIC_READ_", "KEYCAST_", "HANDLER_CACHE_SIZE", "GOMAXPROCS", "GOGC"},
		"environment variable name prefixes to record as settings")
	return c
}
