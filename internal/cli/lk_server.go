package cli

import (
	"errors"
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
			return serverExit(linkkeysmain.Run(cmd.Context(), serverEnv(env), f, prefix))
		},
	}
	f.Register(c.Flags())
	return c
}

func serverEnv(env *Env) linkkeysmain.Env {
	return linkkeysmain.Env{Stdout: env.Stdout, Stderr: env.Stderr, Getenv: env.Getenv, Logger: env.Logger}
}

// serverExit carries the server command's exit status over to the tree's.
func serverExit(err error) error {
	var ee *linkkeysmain.ExitError
	if errors.As(err, &ee) {
		return &ExitError{Code: ee.Code, Err: ee.Err}
	}
	return err
}
