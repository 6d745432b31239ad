package cli

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/loadproof/loadproof/internal/capacity"
	"github.com/loadproof/loadproof/internal/capacity/plan"
	"github.com/loadproof/loadproof/internal/linkkeysresult"
	"github.com/loadproof/loadproof/internal/linkkeysserver"
)

// The plan's variables are exactly the server's TCP_* and PUBLIC_READ_* variables but TCP_PORT.
func TestLinkKeysPlanVariablesAreTheServers(t *testing.T) {
	var want []string
	for _, v := range linkkeysserver.EnvVars {
		if (strings.HasPrefix(v, "TCP_") || strings.HasPrefix(v, "PUBLIC_READ_")) && v != "TCP_PORT" {
			want = append(want, v)
		}
	}
	if !slices.Equal(want, plan.LinkKeysVariables) {
		t.Fatalf("plan.LinkKeysVariables %v\nwant %v", plan.LinkKeysVariables, want)
	}
}

func TestLinkKeysExamplePlanIsValid(t *testing.T) {
	for _, path := range []string{"../../docs/linkkeys-capacity-plan.example.json", "testdata/linkkeys-capacity-scaled.json"} {
		p, err := capacity.ReadLinkKeysPlan(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := capacity.ValidateLinkKeys(p, capacity.LinkKeysValidateOptions{ServerConfigLine: lkExpectedConfigLine}); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
}

// TestLinkKeysCapacityEndToEnd runs the scaled-down seed plan end to end: a fresh reference server
// (this test binary's server subcommand) per phase, started with the phase's profile and verified,
// the workloads through the combined command's streams, and the bundle checked.
func TestLinkKeysCapacityEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run of about 30 s")
	}
	t.Setenv(childTreeEnv, "linkkeys")
	out := filepath.Join(t.TempDir(), "evidence")
	env, stdout, stderr := lkTestEnv()
	code := Run(context.Background(), LinkKeys, []string{"capacity", "--plan", "testdata/linkkeys-capacity-scaled.json", "--output", out}, env)
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if testing.Verbose() {
		t.Log(stdout.String())
	}
	if err := capacity.VerifyBundle(out); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, capacity.EvidenceFile))
	if err != nil {
		t.Fatal(err)
	}
	ev, err := capacity.ReadLinkKeysEvidence(b)
	if err != nil {
		t.Fatal(err)
	}
	if !ev.Passed || !ev.CertificationReady || len(ev.Phases) != 5 {
		t.Fatalf("passed %v ready %v phases %d blockers %q\n%s", ev.Passed, ev.CertificationReady, len(ev.Phases), ev.CertificationBlockers, stdout)
	}
	for _, ph := range ev.Phases {
		s := ph.Server
		if s == nil || s.Mode != "started" || len(s.Mismatches) != 0 || s.ConfigLine != s.ExpectedConfigLine || !s.EnvironmentVerified {
			t.Fatalf("phase %s server %+v", ph.Name, s)
		}
		if _, err := os.Stat(filepath.Join(out, s.Log)); err != nil {
			t.Fatalf("phase %s server log: %v", ph.Name, err)
		}
		rb, err := os.ReadFile(filepath.Join(out, ph.ResultsFile))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := linkkeysresult.Read(rb); err != nil {
			t.Fatalf("phase %s results file: %v", ph.Name, err)
		}
	}
	ddos := ev.Phases[3]
	if ddos.Metrics["ddos.shed_overflow"] != 490 || ddos.Metrics["ddos.shed_global"] != 810 || ddos.Metrics["ddos.admitted"] != 200 {
		t.Fatalf("ddos metrics %v", ddos.Metrics)
	}
	comb := ev.Phases[4]
	if comb.Kind != "combined" || comb.Metrics["held.survival_percent"] != 100 || comb.Metrics["ddos.shed_overflow"] < 1 {
		t.Fatalf("combined metrics %v", comb.Metrics)
	}
	// The report reads the bundle alone.
	renv, rout, rerr := lkTestEnv()
	if code := Run(context.Background(), Loadproof, []string{"report", out}, renv); code != ExitOK {
		t.Fatalf("report: exit %d %s", code, rerr)
	}
	for _, want := range []string{"Capacity evidence (linkkeys harness): seed-000-scaled", "server: started, profile scale, environment verified",
		"passed     ddos.shed_overflow", "manifest: every file of", "---- phase 5 combined: phase-05-combined.json", "[held] survival: 1000 of 1000",
		"certification_ready: true"} {
		if !strings.Contains(rout.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, rout)
		}
	}
	renv, rout, rerr = lkTestEnv()
	if code := Run(context.Background(), Loadproof, []string{"report", "--format", "csv", filepath.Join(out, comb.ResultsFile)}, renv); code != ExitOK {
		t.Fatalf("report csv: exit %d %s", code, rerr)
	}
	if !strings.Contains(rout.String(), "\ncombined,held,connections,1000,1000,0,") || !strings.Contains(rout.String(), "\ncombined,ddos,ddos,1200,") {
		t.Fatalf("csv:\n%s", rout)
	}
}
