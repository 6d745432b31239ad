package cli

import "github.com/spf13/cobra"

// Owned by the LinkKeys load-client work (lk_clients.go replaces this stub file).
func newLinkKeysConnectionsCmd(env *Env) *cobra.Command    { return notYet("connections") }
func newLinkKeysHandshakeBenchCmd(env *Env) *cobra.Command { return notYet("handshake-bench") }
func newLinkKeysRequestBenchCmd(env *Env) *cobra.Command   { return notYet("request-bench") }
func newLinkKeysDDoSCmd(env *Env) *cobra.Command           { return notYet("ddos") }
func newLinkKeysSmokeCmd(env *Env) *cobra.Command          { return notYet("smoke") }
func linkKeysHiddenCmds(env *Env) []*cobra.Command         { return nil }
