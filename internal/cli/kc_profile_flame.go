package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/loadproof/loadproof/internal/atomicfile"
	"github.com/loadproof/loadproof/internal/keycastresult"
	"github.com/loadproof/loadproof/internal/profiling"
)

// addProfileFlameFlags adds the profile command's flame graph flags.
func addProfileFlameFlags(f *pflag.FlagSet) {
	f.String("serve", "", "after the run, serve pprof's web UI for the CPU profile on this address (HOST:PORT; :PORT binds loopback) until Ctrl-C")
	f.String("serve-token", "", "require this token on every request to --serve's UI (the URL printed then carries it); env "+serveTokenEnv+" keeps it out of the process list; give one before binding a non-loopback address")
}

// profileDataDir is the started server's data directory (database, master key, server key):
// out/server-data, kept between runs. With --skip-setup, and the users file beside it, it is used
// as it is, so the server that starts holds the key that issued the users' tokens (a fresh key
// would answer every reused token with 401); otherwise it starts empty.
func profileDataDir(cmd *cobra.Command, out string) (string, error) {
	reuse, _ := cmd.Flags().GetBool("skip-setup")
	dir := filepath.Join(out, "server-data")
	_, uerr := os.Stat(filepath.Join(out, "flamegraph-users.json"))
	if !reuse || uerr != nil {
		if err := os.RemoveAll(dir); err != nil {
			return "", fmt.Errorf("clearing %s: %w", dir, err)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	return dir, nil
}

// finishProfile writes the flame graph pages beside the profiles, judges the run (a profile of a
// run in which nothing succeeded profiles the error path only) and, with --serve, serves pprof's
// web UI until the command's context ends.
func finishProfile(ctx context.Context, cmd *cobra.Command, env *Env, cpuPath, heapPath string, res *keycastresult.Results) error {
	if err := writeFlamePages(env, cpuPath, heapPath); err != nil {
		return err
	}
	if err := profileVerdict(res); err != nil {
		return err
	}
	return serveProfile(ctx, cmd, env, cpuPath)
}

// writeFlamePages writes a self-contained flame graph page beside each profile (.flame.html).
func writeFlamePages(env *Env, profiles ...string) error {
	fmt.Fprintln(env.Stdout, "\nFlame graphs (open in a browser; no Go toolchain or graphviz needed):")
	for _, p := range profiles {
		page, err := profiling.HTML(p)
		if err != nil {
			return &ExitError{Code: ExitFailure, Err: fmt.Errorf("profile: %w", err)}
		}
		out := strings.TrimSuffix(p, ".pprof") + ".flame.html"
		if err := atomicfile.Write(out, page, 0o644); err != nil {
			return &ExitError{Code: ExitFailure, Err: fmt.Errorf("profile: %w", err)}
		}
		fmt.Fprintf(env.Stdout, "  %s\n", out)
	}
	return nil
}

// serveProfile serves pprof's web UI for the profile when --serve is given, until ctx ends.
func serveProfile(ctx context.Context, cmd *cobra.Command, env *Env, profile string) error {
	addr, _ := cmd.Flags().GetString("serve")
	if addr == "" {
		return nil
	}
	token, err := flagOrEnvToken(cmd, env, "serve-token", serveTokenEnv)
	if err != nil {
		return err
	}
	err = profiling.Serve(ctx, profiling.ServeOptions{Addr: addr, Profile: profile, Token: token, Log: env.Stderr, Logger: env.Logger,
		Ready: func(url string) {
			out := env.Stdout
			if token != "" {
				out = env.Stderr // the URL carries the token: the terminal only
			}
			fmt.Fprintf(out, "\npprof web UI for %s: %s (Ctrl-C to stop)\n", profile, url)
		}})
	if err != nil {
		return &ExitError{Code: ExitCouldNotRun, Err: fmt.Errorf("profile: --serve: %w", err)}
	}
	return nil
}

// profileVerdict fails a profile run in which no request succeeded: every request a 401 means the
// users file's tokens were issued by another server (another key), typically a --skip-setup run
// against a server whose data was not kept.
func profileVerdict(res *keycastresult.Results) error {
	s := res.Summary
	switch {
	case s.TotalRequests == 0:
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("profile: the run sent no request; the profile shows an idle server")}
	case s.ErrorsAuth == s.TotalRequests:
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("profile: every one of the %d requests failed authentication (401): "+
			"the users file's tokens do not belong to this server; run without --skip-setup to register new users", s.TotalRequests)}
	case s.SuccessfulRequests == 0:
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("profile: none of the %d requests succeeded (%d auth, %d server, %d client, %d network errors); "+
			"the profile shows the error path only", s.TotalRequests, s.ErrorsAuth, s.ErrorsServer, s.ErrorsClient, s.ErrorsNetwork)}
	}
	return nil
}
