package cli

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/loadproof/loadproof/internal/linkkeysmain"
)

// newLinkKeysServerCmd mounts the LinkKeys reference server's command (internal/linkkeysmain, which
// cmd/linkkeys-server runs on its own) in the cobra tree: the same flags, environment and wiring.
func newLinkKeysServerCmd(env *Env) *cobra.Command {
	var f linkkeysmain.Flags
	c := &cobra.Command{
		Use:   "server",
		Short: linkkeysmain.Short,
		Long:  linkkeysmain.Long,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			prefix := strings.Fields(cmd.CommandPath())[1:]
			return linkkeysmain.Run(cmd.Context(), *env, f, prefix)
		},
	}
	f.Register(c.Flags())
	return c
}
