package cli

import "github.com/spf13/cobra"

// Owned by the capacity work (kc_capacity.go replaces this stub file).
func newKeycastCapacityCmd(env *Env) *cobra.Command { return notYet("capacity") }
