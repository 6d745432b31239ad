package cli

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/loadproof/loadproof/internal/engine"
	"github.com/loadproof/loadproof/internal/remotewrite"
	"github.com/loadproof/loadproof/internal/result"
)

// remoteWriteAuthEnv carries an Authorization header value outside argv.
const remoteWriteAuthEnv = "LOADPROOF_REMOTE_WRITE_AUTHORIZATION"

// attachRemoteWrite gives a command --remote-write URL (and its header, CA and histogram flags):
// every engine run under the command's context streams its interval snapshots to a Prometheus
// remote-write endpoint as they close (internal/remotewrite); at the end the command waits up to 10 s
// for the queue to drain and says what was sent, dropped and failed.
func attachRemoteWrite(c *cobra.Command, env *Env, run dashboardRun) {
	bindRemoteWriteFlags(c.Flags())
	inner := c.RunE
	c.RunE = func(cmd *cobra.Command, args []string) error {
		u, _ := cmd.Flags().GetString("remote-write")
		if u == "" {
			return inner(cmd, args)
		}
		hs, _ := cmd.Flags().GetStringArray("remote-write-header")
		headers := map[string]string{}
		for _, h := range hs {
			k, v, err := remotewrite.ParseHeader(h)
			if err != nil {
				return usageError("--remote-write-header: %v", err)
			}
			headers[k] = v
		}
		if env.Getenv != nil {
			if a := env.Getenv(remoteWriteAuthEnv); a != "" {
				if _, _, err := remotewrite.ParseHeader("Authorization: " + a); err != nil {
					return usageError("%s: %v", remoteWriteAuthEnv, err)
				}
				headers["Authorization"] = a
			}
		}
		labels, err := remoteWriteLabels(cmd)
		if err != nil {
			return err
		}
		ca, _ := cmd.Flags().GetString("remote-write-ca")
		form, _ := cmd.Flags().GetString("remote-write-histograms")
		// The series carry the run's ID: one is made here when none was given, and handed to the
		// command as its --run-id so the result file names the same run.
		runID := ""
		if rf := cmd.Flags().Lookup("run-id"); rf != nil {
			runID = rf.Value.String()
			seg := cmd.Flags().Lookup("segment")
			if runID == "" && (seg == nil || seg.Value.String() == "") {
				runID = result.NewRunID()
				if err := rf.Value.Set(runID); err != nil {
					return err
				}
			}
		}
		host, _ := os.Hostname()
		labels["run_id"], labels["harness"], labels["command"], labels["host"] = runID, run.harness, run.command, host
		w, err := remotewrite.New(remotewrite.Config{URL: u, Headers: headers, CAFile: ca, Histograms: form, Labels: labels})
		if err != nil {
			return usageError("--remote-write: %v", err)
		}
		ctx := engine.WithIntervalObserver(cmd.Context(), w.Observe)
		ctx = engine.WithWorkerObserver(ctx, w.ObserveWorker) // a coordinated run's per-host series
		// Each result file records its delivery: the queue drains (up to 10 s) before the file is
		// written. A capacity plan writes a file per phase: each phase's series carry its name
		// (phase="…") and count from zero, and its file records its own requests.
		ctx = engine.WithPhaseHook(ctx, w.SetPhase)
		// Each wait for delivery is at most 10 s; once one runs out (the endpoint is down or slow),
		// the later ones wait 1 s, so a dead endpoint costs a run 10 s once, not once per phase.
		wait := 10 * time.Second
		deliver := func(f func(context.Context) remotewrite.Stats) remotewrite.Stats {
			fctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			st := f(fctx)
			if st.Pending > 0 {
				wait = time.Second
			}
			return st
		}
		ctx = engine.WithResultHook(ctx, func(e *result.Envelope) {
			st := deliver(w.Flush)
			e.RemoteWrite = &result.RemoteWrite{URL: w.Endpoint(), Sent: st.Sent, Dropped: st.Dropped, Failed: st.Failed, Pending: st.Pending, LastError: st.LastError}
		})
		cmd.SetContext(ctx)
		runErr := inner(cmd, args)
		st := deliver(w.Close)
		line := fmt.Sprintf("remote write: %d requests sent, %d dropped, %d failed", st.Sent, st.Dropped, st.Failed)
		if st.Pending > 0 {
			line += fmt.Sprintf(", %d not confirmed", st.Pending)
		}
		if st.LastError != "" {
			line += " (last error: " + st.LastError + ")"
		}
		fmt.Fprintln(env.Stderr, line)
		return runErr
	}
}

// remoteWriteFlags are the flags bindRemoteWriteFlags defines, --remote-write first.
var remoteWriteFlags = []string{"remote-write", "remote-write-header", "remote-write-ca", "remote-write-histograms", "remote-write-label"}

// bindRemoteWriteFlags defines the remote-write flags (a client command's, and search's, which hands
// them to every trial).
func bindRemoteWriteFlags(f *pflag.FlagSet) {
	f.String("remote-write", "", "stream every second's figures to this Prometheus remote-write `URL` (e.g. http://127.0.0.1:9090/api/v1/write; docs/outputs.md)")
	f.StringArray("remote-write-header", nil, "an HTTP header for --remote-write, 'Name: value' (repeatable); env "+remoteWriteAuthEnv+" sets Authorization outside argv")
	f.String("remote-write-ca", "", "verify an https --remote-write endpoint against the CA certificates in this PEM `file`")
	f.String("remote-write-histograms", remotewrite.Native, "latency as native histograms (native) or classic _bucket series (classic)")
	f.StringArray("remote-write-label", nil, "add the label 'name=value' to every --remote-write series (repeatable; e.g. env=staging)")
}

// remoteWriteArgs checks the remote-write flags set on cmd and returns them as command-line
// arguments for a child command (search's trials); nil when --remote-write is not given.
func remoteWriteArgs(cmd *cobra.Command) ([]string, error) {
	u, _ := cmd.Flags().GetString("remote-write")
	if u == "" {
		for _, n := range remoteWriteFlags[1:] {
			if cmd.Flags().Changed(n) {
				return nil, usageError("--%s needs --remote-write URL", n)
			}
		}
		return nil, nil
	}
	if _, err := remotewrite.CheckURL(u); err != nil {
		return nil, usageError("--remote-write: %v", err)
	}
	if _, err := remoteWriteLabels(cmd); err != nil {
		return nil, err
	}
	var args []string
	for _, n := range remoteWriteFlags {
		f := cmd.Flags().Lookup(n)
		if !f.Changed {
			continue
		}
		if vs, ok := f.Value.(pflag.SliceValue); ok {
			for _, v := range vs.GetSlice() {
				if n == "remote-write-header" {
					if _, _, err := remotewrite.ParseHeader(v); err != nil {
						return nil, usageError("--remote-write-header: %v", err)
					}
				}
				args = append(args, "--"+n+"="+v)
			}
			continue
		}
		args = append(args, "--"+n+"="+f.Value.String())
	}
	return args, nil
}

// remoteWriteLabels reads the --remote-write-label flags.
func remoteWriteLabels(cmd *cobra.Command) (map[string]string, error) {
	ls, _ := cmd.Flags().GetStringArray("remote-write-label")
	if len(ls) > remotewrite.MaxLabels {
		return nil, usageError("--remote-write-label given %d times: at most %d", len(ls), remotewrite.MaxLabels)
	}
	labels := map[string]string{}
	for _, l := range ls {
		k, v, err := remotewrite.ParseLabel(l)
		if err != nil {
			return nil, usageError("--remote-write-label: %v", err)
		}
		if _, dup := labels[k]; dup {
			return nil, usageError("--remote-write-label: %q given twice", k)
		}
		labels[k] = v
	}
	return labels, nil
}
