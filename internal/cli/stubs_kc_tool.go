package cli

import "github.com/spf13/cobra"

// Owned by the Keycast load-tool work (kc_tool.go replaces this stub file).
func newKeycastSetupCmd(env *Env) *cobra.Command   { return notYet("setup") }
func newKeycastRunCmd(env *Env) *cobra.Command     { return notYet("run") }
func newKeycastReportCmd(env *Env) *cobra.Command  { return notYet("report") }
func newKeycastProfileCmd(env *Env) *cobra.Command { return notYet("profile") }
