package cli

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/capacity"
	"github.com/loadproof/loadproof/internal/cost"
	"github.com/loadproof/loadproof/internal/keycastresult"
	"github.com/loadproof/loadproof/internal/linkkeysresult"
	"github.com/loadproof/loadproof/internal/linkkeysserver"
)

// costLine returns the one line of out that starts with "cost: ", failing when there is not
// exactly one.
func costLine(t *testing.T, what, out string) string {
	t.Helper()
	var found []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "cost: ") {
			found = append(found, l)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s: %d cost: lines, want 1:\n%s", what, len(found), out)
	}
	return found[0]
}

// editJSON rewrites a JSON file through edit.
func editJSON(t *testing.T, src, dst string, edit func(m map[string]any)) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCostLinkKeysRealRun: a connections run against the reference server on loopback, priced on
// both sides, prints a cost: line; its result file records the cost of the connections it held
// (recomputed here from the prices, its wall time and its held count); report prints the same
// line and the HTML page carries the tile; verify recomputes the cost, and refuses the file once
// the cost or the figure it divides by is changed. Without a price nothing says cost anywhere.
func TestCostLinkKeysRealRun(t *testing.T) {
	info, dir := lkInfoServer(t, linkkeysserver.TestServerOptions{})
	priced := filepath.Join(dir, "priced.json")
	env, out, errOut := lkTestEnv()
	args := []string{"connections", "--info-file", info, "--count", "12", "--concurrency", "4", "--hold-secs", "0", "--client-ip-count", "2",
		"--json", priced, "--cost-per-hour", "1.5USD", "--server-cost-per-hour", "0.5USD"}
	if code := Run(context.Background(), LinkKeys, args, env); code != ExitOK {
		t.Fatalf("connections: exit %d\n%s%s", code, out, errOut)
	}
	line := costLine(t, "connections", out.String())
	for _, want := range []string{" USD for ", "on 1 machine", "per 10,000 connections held for an hour (load "} {
		if !strings.Contains(line, want) {
			t.Errorf("cost line %q lacks %q", line, want)
		}
	}
	b, err := os.ReadFile(priced)
	if err != nil {
		t.Fatal(err)
	}
	res, err := linkkeysresult.Read(b)
	if err != nil {
		t.Fatal(err)
	}
	c := res.Cost
	if c == nil || res.Hold == nil || res.Hold.Held != 12 || len(c.Units) != 1 {
		t.Fatalf("cost %+v, hold %+v", c, res.Hold)
	}
	// Recomputed here by hand: 2.0 an hour over the run's own wall time; 10,000 held connections
	// cost 2.0 × 10,000 / 12 an hour, 1.5 of it the load machine's.
	secs := res.EndedAt.Sub(res.StartedAt).Seconds()
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	near("seconds", c.Seconds, secs)
	near("total", c.Total, 2.0*secs/3600)
	near("load cost", c.Load.Cost, 1.5*secs/3600)
	near("server cost", c.Server.Cost, 0.5*secs/3600)
	u := c.Units[0]
	if u.Name != cost.UnitHeld10k || u.Capacity != 12 {
		t.Fatalf("unit %+v", u)
	}
	near("per 10k held", u.Total, 2.0*10_000/12)
	near("per 10k held, load", u.Load, 1.5*10_000/12)

	// The report draws the same line from the file alone; the page has the tile.
	code, rout, rerr := loadproof(t, "report", priced)
	if code != ExitOK || costLine(t, "report", rout) != line {
		t.Errorf("report: exit %d, cost line %q, want %q\n%s", code, costLine(t, "report", rout), line, rerr)
	}
	page := filepath.Join(dir, "priced.html")
	if code, _, rerr := loadproof(t, "report", "--format", "html", "-o", page, priced); code != ExitOK {
		t.Fatalf("report --format html: exit %d: %s", code, rerr)
	}
	if hb, err := os.ReadFile(page); err != nil || !strings.Contains(string(hb), `"cost":{"total":"`) {
		t.Errorf("the page lacks the cost tile's data (%v)", err)
	}

	// verify recomputes it.
	code, vout, _ := loadproof(t, "verify", priced)
	if code != ExitOK || !strings.Contains(vout, "cost recomputes from the run's own prices") {
		t.Errorf("verify: exit %d\n%s", code, vout)
	}
	// A cost halved, a cheaper server, or more connections held than the cost was priced for: each
	// is refused, naming what disagrees.
	for name, tc := range map[string]struct {
		edit func(m map[string]any)
		want string
	}{
		"total halved": {func(m map[string]any) {
			c := m["cost"].(map[string]any)
			c["total"] = c["total"].(float64) / 2
		}, "total is"},
		"cheaper server": {func(m map[string]any) {
			m["cost"].(map[string]any)["server"].(map[string]any)["per_hour"] = []any{0.25}
		}, "server cost is"},
		"held count raised": {func(m map[string]any) {
			m["hold"].(map[string]any)["held"] = 24.0
		}, "per_10k_connections_hour capacity is 12, recomputed 24"},
	} {
		bad := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".json")
		editJSON(t, priced, bad, tc.edit)
		code, vout, _ := loadproof(t, "verify", bad)
		if code != ExitFailure || !strings.Contains(vout, tc.want) {
			t.Errorf("%s: verify exit %d, want %d and %q:\n%s", name, code, ExitFailure, tc.want, vout)
		}
		if code, _, rerr := loadproof(t, "report", bad); code == ExitOK || !strings.Contains(rerr, "cost") {
			t.Errorf("%s: report exit %d, stderr %q: a report must refuse a cost that does not recompute", name, code, rerr)
		}
	}

	// Without a price: no cost line, no cost in the file, the report or the page.
	plain := filepath.Join(dir, "plain.json")
	env, out, errOut = lkTestEnv()
	args = []string{"request-bench", "--info-file", info, "--connections", "1", "--duration-secs", "1", "--json", plain}
	if code := Run(context.Background(), LinkKeys, args, env); code != ExitOK {
		t.Fatalf("request-bench: exit %d\n%s%s", code, out, errOut)
	}
	pb, err := os.ReadFile(plain)
	if err != nil {
		t.Fatal(err)
	}
	_, rout, _ = loadproof(t, "report", plain)
	if strings.Contains(out.String(), "cost") || strings.Contains(string(pb), `"cost"`) || strings.Contains(rout, "cost:") {
		t.Errorf("an unpriced run says cost:\n%s\n%s", out, rout)
	}
	plainPage := filepath.Join(dir, "plain.html")
	if code, _, rerr := loadproof(t, "report", "--format", "html", "-o", plainPage, plain); code != ExitOK {
		t.Fatalf("report --format html: exit %d: %s", code, rerr)
	} else if hb, _ := os.ReadFile(plainPage); strings.Contains(string(hb), `"cost":{`) {
		t.Error("an unpriced run's page carries a cost tile")
	}
}

// TestCostKeycastRealRun: keycast run against the reference server with a load price only prints
// the cost: line in its text report, records the cost of a million served requests and verifies;
// two currencies are refused before anything is sent.
func TestCostKeycastRealRun(t *testing.T) {
	url, _ := startServerCmd(t)
	dir := t.TempDir()
	users := filepath.Join(dir, "users.json")
	if code, out, errs := loadproof(t, "keycast", "setup", "--url", url, "--users", "2", "--output", users, "--mode", "http"); code != ExitOK {
		t.Fatalf("setup: exit %d\n%s%s", code, out, errs)
	}
	results := filepath.Join(dir, "run.json")
	code, out, errs := loadproof(t, "keycast", "run", "--url", url, "--users-file", users, "--requests", "40", "--duration", "0",
		"--concurrency", "2", "--ramp-up", "0", "--output", results, "--cost-per-hour", "0.8EUR")
	if code != ExitOK {
		t.Fatalf("run: exit %d\n%s%s", code, out, errs)
	}
	line := costLine(t, "keycast run", out)
	if !strings.Contains(line, " EUR per million requests served") || strings.Contains(line, "server") {
		t.Errorf("cost line %q", line)
	}
	b, err := os.ReadFile(results)
	if err != nil {
		t.Fatal(err)
	}
	res, err := keycastresult.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if c := res.Cost; c == nil || c.Currency != "EUR" || c.Server != nil || len(c.Units) != 1 ||
		c.Units[0].Capacity != float64(res.Summary.SuccessfulRequests) || res.Summary.SuccessfulRequests == 0 {
		t.Fatalf("cost %+v (successful %d)", res.Cost, res.Summary.SuccessfulRequests)
	}
	if code, vout, _ := loadproof(t, "verify", results); code != ExitOK || !strings.Contains(vout, "cost recomputes") {
		t.Errorf("verify: exit %d\n%s", code, vout)
	}
	bad := filepath.Join(dir, "bad.json")
	editJSON(t, results, bad, func(m map[string]any) {
		m["summary"].(map[string]any)["successful_requests"] = m["summary"].(map[string]any)["successful_requests"].(float64) - 1
		m["summary"].(map[string]any)["failed_requests"] = m["summary"].(map[string]any)["failed_requests"].(float64) + 1
	})
	if code, vout, _ := loadproof(t, "verify", bad); code != ExitFailure || !strings.Contains(vout, "per_million_requests capacity") {
		t.Errorf("verify of a file whose successes changed: exit %d\n%s", code, vout)
	}
	code, _, errs = loadproof(t, "keycast", "run", "--url", url, "--users-file", users, "--requests", "4", "--duration", "0",
		"--output", filepath.Join(dir, "never.json"), "--cost-per-hour", "1USD", "--server-cost-per-hour", "1EUR")
	if code != ExitUsage || !strings.Contains(errs, "cannot add up") {
		t.Errorf("two currencies: exit %d, stderr %q", code, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, "never.json")); !os.IsNotExist(err) {
		t.Errorf("a refused run wrote its results file (%v)", err)
	}
}

func TestPricesFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"connections", "--cost-per-hour", "-1"}, "plain decimal number"},
		{[]string{"connections", "--cost-per-hour", "1e3"}, "plain decimal number"},
		{[]string{"request-bench", "--server-cost-per-hour", "200000"}, "above 100000"},
		{[]string{"handshake-bench", "--cost-per-hour", ""}, "empty price"},
	} {
		env, out, errOut := lkTestEnv()
		if code := Run(context.Background(), LinkKeys, tc.args, env); code != ExitUsage || !strings.Contains(errOut.String(), tc.err) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q (%s)", tc.args, code, errOut, ExitUsage, tc.err, out)
		}
	}
}

// TestCostCapacityPhases: keycast capacity prices every phase from the plan's cost_per_hour (a flag
// overrides it), prints each phase's cost and their sum, and the bundle verifies with every
// phase's cost recomputed.
func TestCostCapacityPhases(t *testing.T) {
	dir, planPath := capacityFixture(t)
	b, err := os.ReadFile(planPath)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["cost_per_hour"] = "3.6USD"
	b, _ = json.Marshal(m)
	if err := os.WriteFile(planPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)
	timed := func(inner capacity.Runner) capacity.Runner {
		return func(ctx context.Context, run capacity.PhaseRun) (*keycastresult.Results, error) {
			res, err := inner(ctx, run)
			if res != nil {
				res.Envelope.StartedAt = start.Add(time.Duration(run.Index) * time.Minute)
				res.Envelope.EndedAt = res.Envelope.StartedAt.Add(10 * time.Second) // 0.01 USD at 3.6 USD an hour
			}
			return res, err
		}
	}
	out := filepath.Join(dir, "ev")
	code, stdout, stderr := runCapacity(t, timed(cannedRunner(-1, -1)), "--plan", planPath, "--output", out)
	if code != ExitOK {
		t.Fatalf("capacity: exit %d\n%s%s", code, stdout, stderr)
	}
	if n := strings.Count(stdout, "\nphase "); n != 6 || !strings.Contains(stdout, "all phases: cost: 0.06 USD for 60 s") {
		t.Errorf("%d phase cost lines; summary:\n%s", n, stdout)
	}
	if code, vout, _ := loadproof(t, "verify", out); code != ExitOK || !strings.Contains(vout, "the cost of each of 6 priced phases recomputes") {
		t.Errorf("verify: exit %d\n%s", code, vout)
	}
	out2 := filepath.Join(dir, "ev2")
	code, stdout, stderr = runCapacity(t, timed(cannedRunner(-1, -1)), "--plan", planPath, "--output", out2, "--cost-per-hour", "7.2USD")
	if code != ExitOK || !strings.Contains(stdout, "all phases: cost: 0.12 USD for 60 s") {
		t.Errorf("the flag does not override the plan: exit %d\n%s%s", code, stdout, stderr)
	}
}

// TestCostCapacityPricesTheFleet: under coordinate, keycast capacity prices each phase at every
// machine of the run (the coordinator's price here, the workers being spawned on its machine), as
// keycast run does, and refuses a fleet whose prices cannot add up with the plan's before anything
// runs. Before, a coordinated plan was priced at its own price alone.
func TestCostCapacityPricesTheFleet(t *testing.T) {
	dir, planPath := capacityFixture(t)
	start := time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)
	capacityRunner = func(ctx context.Context, run capacity.PhaseRun) (*keycastresult.Results, error) {
		res, err := cannedRunner(-1, -1)(ctx, run)
		if res != nil {
			res.Envelope.StartedAt = start.Add(time.Duration(run.Index) * time.Minute)
			res.Envelope.EndedAt = res.Envelope.StartedAt.Add(10 * time.Second) // 0.01 USD at 3.6 USD an hour
		}
		return res, err
	}
	t.Cleanup(func() { capacityRunner = nil })
	fleet := &cost.Fleet{Coordinator: cost.Price{PerHour: 3.6, Currency: "USD", Given: true}, Local: true}
	out := filepath.Join(dir, "ev")
	code, stdout, stderr := runTree(t, treeOpts{fleet: fleet}, "keycast", "capacity", "--plan", planPath, "--output", out)
	if code != ExitOK || !strings.Contains(stdout, "all phases: cost: 0.06 USD for 60 s") {
		t.Fatalf("capacity in coordinate's tree: exit %d; want every phase priced at the coordinator's 3.6 USD an hour\n%s%s", code, stdout, stderr)
	}
	eur := &cost.Fleet{Workers: []cost.Price{{PerHour: 1, Currency: "EUR", Given: true}}, Coordinator: cost.Price{PerHour: 1, Currency: "USD", Given: true}}
	code, _, stderr = runTree(t, treeOpts{fleet: eur}, "keycast", "capacity", "--plan", planPath, "--output", filepath.Join(dir, "ev2"))
	if code != ExitUsage || !strings.Contains(stderr, "cannot add up") {
		t.Fatalf("a fleet priced in two currencies: exit %d\n%s", code, stderr)
	}
}
