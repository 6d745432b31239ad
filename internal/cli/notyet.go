package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

// notYet is a placeholder for a command still being built; it fails loudly rather than pretending.
func notYet(name string) *cobra.Command {
	return &cobra.Command{
		Use:   name,
		Short: name + " (not built yet)",
		RunE: func(*cobra.Command, []string) error {
			return &ExitError{Code: ExitFailure, Err: fmt.Errorf("%s is not built yet", name)}
		},
	}
}
