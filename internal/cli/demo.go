package cli

import (
	"github.com/spf13/cobra"
)

func newDemoCmd(env *Env) *cobra.Command {
	return &cobra.Command{
		Use:   "demo",
		Short: "Run the LinkKeys smoke run and a short Keycast setup, run and capacity plan on the embedded servers",
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDemo(cmd.Context(), env)
		},
	}
}
