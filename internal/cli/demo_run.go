package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/loadproof/loadproof/internal/capacity"
	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/keycastload"
	"github.com/loadproof/loadproof/internal/keycastresult"
	"github.com/loadproof/loadproof/internal/keycastserver"
	"github.com/loadproof/loadproof/internal/launch"
	"github.com/loadproof/loadproof/internal/linkkeysload"
	"github.com/loadproof/loadproof/internal/report"
)

// demoOptions sizes the demo; the defaults keep it near a minute and a half on a small machine.
type demoOptions struct {
	Output      string
	Users       int
	RunSeconds  int
	PhaseSecs   int
	SkipLinkKey bool
	Verbose     bool
}

// runDemo runs the LinkKeys smoke run against a reference server process, then a short Keycast
// setup, run and capacity profile against an embedded reference server (SQLite), and prints what it
// measured and where the files are.
func runDemo(ctx context.Context, env *Env, opt demoOptions) error {
	out, err := filepath.Abs(opt.Output)
	if err != nil {
		return err
	}
	if entries, err := os.ReadDir(out); err == nil && len(entries) > 0 {
		return usageError("demo: output directory %s is not empty; remove it or pass --output", out)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	w := env.Stdout
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if opt.Verbose {
		logger = env.Logger
	}
	started := time.Now()

	var lkSummary linkkeysload.Summary
	var lkResults []string // the smoke run's result files, one per client command
	if !opt.SkipLinkKey {
		fmt.Fprintln(w, "== LinkKeys: smoke run against a reference server process")
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("demo: finding own executable: %w", err)
		}
		lkSummary, err = linkkeysload.Smoke(ctx, linkkeysload.SmokeOptions{
			Executable: exe, ServerArgs: []string{"linkkeys", "server"},
			Stdout: w, Stderr: env.Stderr, Log: logger,
		})
		if err != nil {
			return fmt.Errorf("demo: LinkKeys smoke run: %w", err)
		}
		for _, st := range lkSummary.Steps {
			if st.Result == nil {
				continue
			}
			path := filepath.Join(out, "linkkeys-"+st.Name+".json")
			if err := writeJSONFile(path, st.Result); err != nil {
				return fmt.Errorf("demo: %w", err)
			}
			lkResults = append(lkResults, path)
		}
		fmt.Fprintln(w)
	}

	fmt.Fprintln(w, "== Keycast: embedded reference server (SQLite)")
	dataDir := filepath.Join(out, "keycast-data")
	// One CPU slot and a short queue, so the capacity profile's spike meets the shedding contract.
	srv, err := keycastserver.New(keycastserver.Config{DataDir: dataDir, CPUSlots: 1, CPUQueue: 4, BcryptCost: 8}, logger)
	if err != nil {
		return fmt.Errorf("demo: starting the Keycast server: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	served := launch.Serve(func() error { return srv.Serve(ln) }, srv.Shutdown, nil, 5*time.Second)
	defer served.Stop()
	url := "http://" + ln.Addr().String()
	fmt.Fprintf(w, "server: %s (data in %s)\n", url, dataDir)

	setupStart := time.Now()
	setup, err := keycastload.Setup(ctx, keycastload.SetupConfig{
		URL: url, Users: opt.Users, Concurrency: 4, Mode: keycastload.ModeHTTP, Logger: logger,
	})
	if err != nil {
		return fmt.Errorf("demo: keycast setup: %w", err)
	}
	usersPath := filepath.Join(out, "keycast-users.json")
	if err := keycast.WriteUsersFile(usersPath, setup.File); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	fmt.Fprintf(w, "setup: %d users registered through register -> authorize (PKCE S256) -> token in %.1fs\n",
		len(setup.File.Users), time.Since(setupStart).Seconds())

	res, err := keycastload.Run(ctx, keycastload.RunConfig{
		URL: url, Concurrency: 16, Duration: time.Duration(opt.RunSeconds) * time.Second,
		Scenario: keycast.ScenarioWarmCache, Method: keycast.MethodGetPublicKey,
		Users: setup.File.Users, UsersFile: usersPath, ReportInterval: time.Second, Logger: logger,
	})
	if err != nil {
		return fmt.Errorf("demo: keycast run: %w", err)
	}
	resultsPath := filepath.Join(out, "keycast-results.json")
	if err := keycastresult.Write(resultsPath, res); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, report.Text(res))
	fmt.Fprintln(w)

	evidenceDir := filepath.Join(out, "capacity-evidence")
	ev, cerr := capacity.Execute(ctx, capacity.RehearsalPlan(capacity.RehearsalOptions{Name: "loadproof-demo", URL: url, UsersFile: usersPath,
		PhaseSeconds: uint64(opt.PhaseSecs), SpikeConcurrency: 32, DeclareShedding: true}), capacity.Options{
		OutputDir: evidenceDir, Progress: w, Logger: logger,
	})
	if ev == nil {
		return fmt.Errorf("demo: capacity profile: %w", cerr)
	}

	fmt.Fprintln(w)
	fmt.Fprintln(w, "== What the demo measured")
	if !opt.SkipLinkKey {
		fmt.Fprintf(w, "LinkKeys smoke run: ok=%v in %s, %d steps\n", lkSummary.OK, time.Duration(lkSummary.Elapsed).Round(time.Millisecond), len(lkSummary.Steps))
	}
	s := res.Summary
	fmt.Fprintf(w, "Keycast get_public_key, warm cache, 16 workers: %d requests, %.0f req/s, p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms, %d failed\n",
		s.TotalRequests, s.RequestsPerSecond, s.LatencyP50Ms, s.LatencyP99Ms, s.LatencyP999Ms, s.FailedRequests)
	fmt.Fprintf(w, "Keycast capacity profile: passed=%v certification_ready=%v", ev.Passed, ev.CertificationReady)
	if len(ev.Phases) > 1 && ev.Phases[1].Results != nil {
		fmt.Fprintf(w, " (spike shed %.1f%% of requests with 503 admission_rejected)", 100*ev.Phases[1].Results.Summary.IntentionalRejectionRate)
	}
	fmt.Fprintln(w)
	for _, b := range ev.CertificationBlockers {
		fmt.Fprintf(w, "  not ready: %s\n", b)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Files:")
	for _, p := range lkResults {
		fmt.Fprintf(w, "  %s  LinkKeys smoke step result (redraw with: loadproof report %s)\n", p, p)
	}
	fmt.Fprintf(w, "  %s  Keycast users (tokens: keep private)\n", usersPath)
	fmt.Fprintf(w, "  %s  Keycast run results (redraw with: loadproof keycast report --input %s)\n", resultsPath, resultsPath)
	fmt.Fprintf(w, "  %s  capacity evidence bundle (evidence.json, manifest.json, one results file per phase)\n", evidenceDir)
	fmt.Fprintf(w, "  %s  Keycast server data (SQLite, master key, server key)\n", dataDir)
	fmt.Fprintf(w, "demo finished in %s\n", time.Since(started).Round(time.Second))
	if path, err := writeDemoReport(out, resultsPath, evidenceDir, lkResults); err != nil {
		fmt.Fprintf(w, "no report.html: %v\n", err)
	} else {
		fmt.Fprintf(w, "Report of everything the demo ran (open in a browser; works offline): %s\n", path)
	}
	if cerr != nil && !errors.Is(cerr, capacity.ErrLimitsExceeded) {
		return fmt.Errorf("demo: capacity profile: %w", cerr)
	}
	return nil
}
