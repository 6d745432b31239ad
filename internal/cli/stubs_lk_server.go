package cli

import "github.com/spf13/cobra"

// newLinkKeysServerCmd is owned by the LinkKeys server work (file lk_server.go replaces this stub).
func newLinkKeysServerCmd(env *Env) *cobra.Command { return notYet("server") }
