package cli

import "github.com/spf13/cobra"

// Owned by the Keycast server work (kc_server.go replaces this stub file).
func newKeycastServerCmd(env *Env) *cobra.Command { return notYet("server") }
