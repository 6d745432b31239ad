package cli

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/loadproof/loadproof/internal/coord"
	"github.com/loadproof/loadproof/internal/cost"
	"github.com/loadproof/loadproof/internal/keycastload"
	"github.com/loadproof/loadproof/internal/keycastresult"
	"github.com/loadproof/loadproof/internal/keycastserver"
	"github.com/loadproof/loadproof/internal/keycastserver/kctest"
)

// spySpread is a coord.Spread that runs a Keycast run here (keycastload.Run) and refuses a LinkKeys
// one, recording what it was given: the coordinator side of a tree without NATS or workers.
type spySpread struct {
	workers int
	mu      sync.Mutex
	keycast []keycastload.RunConfig
	lkSpecs []string
}

func (s *spySpread) KeycastRun(ctx context.Context, cfg keycastload.RunConfig) (*keycastresult.Results, error) {
	s.mu.Lock()
	s.keycast = append(s.keycast, cfg)
	s.mu.Unlock()
	return keycastload.Run(ctx, cfg)
}

func (s *spySpread) LinkKeysRun(_ context.Context, spec string) ([][]byte, error) {
	s.mu.Lock()
	s.lkSpecs = append(s.lkSpecs, spec)
	s.mu.Unlock()
	return make([][]byte, s.workers), errors.New("spy: no workers here")
}

func (s *spySpread) Count() int { return s.workers }

// runTree runs one command line on a tree built with o.
func runTree(t *testing.T, o treeOpts, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb safeBuf
	env := &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" },
		Logger: slog.New(slog.NewTextHandler(&errb, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	code = runRoot(context.Background(), newRoot(Loadproof, env, o), args, env)
	return code, out.String(), errb.String()
}

// TestTreeRunner: a client command learns where it runs and what the machines cost from the tree
// it was built in, not from its context. coordinate's tree (a Spread and the fleet's prices) hands
// a Keycast run to the spread and prices it at the coordinator's price; a LinkKeys client splits
// into the spread's worker count; the plain tree runs here and prices nothing.
func TestTreeRunner(t *testing.T) {
	srv := kctest.Start(t, keycastserver.Config{})
	users := kcUsers(t, srv.URL, 2)
	dir := t.TempDir()
	run := func(out string) []string {
		return []string{"keycast", "run", "--url", srv.URL, "--users-file", users, "-d", "0", "-n", "20", "-c", "2",
			"-m", "get-public-key", "--ramp-up", "0", "-o", out}
	}

	spread := &spySpread{workers: 3}
	fleet := &cost.Fleet{Coordinator: cost.Price{PerHour: 2, Currency: "USD", Given: true}, Local: true}
	spreadOut := filepath.Join(dir, "spread.json")
	if code, out, errs := runTree(t, treeOpts{runner: coord.Runner{Spread: spread}, fleet: fleet}, run(spreadOut)...); code != ExitOK {
		t.Fatalf("keycast run in coordinate's tree: exit %d\n%s%s", code, out, errs)
	}
	if len(spread.keycast) != 1 || spread.keycast[0].Requests != 20 {
		t.Fatalf("the spread ran %d Keycast runs (%+v); want the one configured", len(spread.keycast), spread.keycast)
	}
	if res := readResults(t, spreadOut); res.Cost == nil || res.Cost.Currency != "USD" {
		t.Errorf("coordinate's tree: cost %+v; want the coordinator's price (USD)", res.Cost)
	}

	plainOut := filepath.Join(dir, "plain.json")
	if code, out, errs := runTree(t, treeOpts{}, run(plainOut)...); code != ExitOK {
		t.Fatalf("keycast run in the plain tree: exit %d\n%s%s", code, out, errs)
	}
	if len(spread.keycast) != 1 {
		t.Errorf("the plain tree reached the spread")
	}
	if res := readResults(t, plainOut); res.Cost != nil || res.Summary.TotalRequests != 20 {
		t.Errorf("plain tree: cost %+v, %d requests; want no cost and the 20 requests run here", res.Cost, res.Summary.TotalRequests)
	}

	code, out, errs := runTree(t, treeOpts{runner: coord.Runner{Spread: spread}}, "linkkeys", "ddos", "--target", "127.0.0.1:1",
		"--fingerprint", strings.Repeat("ab", 32), "--domain", "example.test", "--sources", "30", "--concurrency", "3")
	if code == ExitOK || len(spread.lkSpecs) != 1 || !strings.Contains(errs, "of 3 workers failed") {
		t.Fatalf("linkkeys ddos in coordinate's tree: exit %d, specs %q\n%s%s", code, spread.lkSpecs, out, errs)
	}
}
