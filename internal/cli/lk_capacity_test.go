package cli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/capacity"
	"github.com/loadproof/loadproof/internal/capacity/plan"
	"github.com/loadproof/loadproof/internal/evidence"
	"github.com/loadproof/loadproof/internal/linkkeys"
	"github.com/loadproof/loadproof/internal/linkkeysload"
	"github.com/loadproof/loadproof/internal/linkkeysresult"
	"github.com/loadproof/loadproof/internal/linkkeysserver"
	"github.com/loadproof/loadproof/internal/testwait"
)

// The plan's variables are exactly the server's TCP_* and PUBLIC_READ_* variables but TCP_PORT and
// TCP_SOURCE_PREFIXES (the harness sets both).
func TestLinkKeysPlanVariablesAreTheServers(t *testing.T) {
	var want []string
	for _, v := range linkkeysserver.EnvVars {
		if (strings.HasPrefix(v, "TCP_") || strings.HasPrefix(v, "PUBLIC_READ_")) && v != "TCP_PORT" && v != plan.SourcePrefixesVariable {
			want = append(want, v)
		}
	}
	if !slices.Equal(want, plan.LinkKeysVariables) {
		t.Fatalf("plan.LinkKeysVariables %v\nwant %v", plan.LinkKeysVariables, want)
	}
	if plan.SourcePrefixesVariable != linkkeysserver.SourcePrefixesVar || linkkeysload.SourcePrefixesVar != linkkeysserver.SourcePrefixesVar {
		t.Fatal("the source prefixes variable is spelled differently")
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
	key := filepath.Join(t.TempDir(), "k")
	if _, err := evidence.WriteKeyPair(key, nil); err != nil {
		t.Fatal(err)
	}
	env, stdout, stderr := lkTestEnv()
	code := Run(context.Background(), LinkKeys, []string{"capacity", "--plan", "testdata/linkkeys-capacity-scaled.json", "--output", out,
		"--sign-key", key + ".key"}, env)
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if testing.Verbose() {
		t.Log(stdout.String())
	}
	// The bundle verifies whole: manifest, every check recomputed from real results, signature.
	pub, err := evidence.ReadPublicKey(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	if f := evidence.Verify(out, verifyOptions(pub)); !f.OK() {
		t.Fatalf("the bundle does not verify:\n%s", strings.Join(f.Problems, "\n"))
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
	for i, ph := range ev.Phases {
		s := ph.Server
		if s == nil || s.Mode != "started" || len(s.Mismatches) != 0 || s.ConfigLine != s.ExpectedConfigLine || !s.EnvironmentVerified {
			t.Fatalf("phase %s server %+v", ph.Name, s)
		}
		// Every started server counts the phase's streams apart, verified like its limits.
		prefixes := capacity.CombinedConfig(&ev.Plan.Phases[i]).SourcePrefixes()
		if s.SourcePrefixes != prefixes || s.Declared[plan.SourcePrefixesVariable] != prefixes || s.Environment[plan.SourcePrefixesVariable] != prefixes ||
			!strings.HasSuffix(s.ConfigLine, " source_prefixes="+prefixes) || ph.Results.Combined.Attribution != "source-prefix" {
			t.Fatalf("phase %s: prefixes %q, server %+v", ph.Name, prefixes, s)
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
	// Two streams of the combined phase are shed, each for its own reason: elimination from the
	// whole run's counters cannot split them; the server's per-prefix counters do, exactly.
	comb := ev.Phases[4]
	m := comb.Metrics
	if comb.Kind != "combined" || m["held.survival_percent"] != 100 || m["ddos.shed_overflow"] < 1 || m["handshakes.shed_per_source"] < 1 ||
		m["ddos.shed_per_source"] != 0 || m["handshakes.shed_overflow"] != 0 || m["held.shed"] != 0 {
		t.Fatalf("combined metrics %v", m)
	}
	// The request stream ran in a client process of its own, apart from the handshakes and the held
	// population (linkkeysload.Run.StreamProcesses), which was still held to the end (survival above).
	hs, rq := comb.Results.Combined.Stream("handshakes"), comb.Results.Combined.Stream("requests")
	if len(hs.PIDs) == 0 || len(rq.PIDs) == 0 || slices.ContainsFunc(hs.PIDs, func(p int) bool { return slices.Contains(rq.PIDs, p) }) ||
		!slices.Equal(comb.Results.Combined.Stream("held").PIDs, hs.PIDs) {
		t.Errorf("combined phase pids: handshakes %v, requests %v, held %v", hs.PIDs, rq.PIDs, comb.Results.Combined.Stream("held").PIDs)
	}
	var shed, accepted capacity.Number
	for _, st := range []string{"held", "handshakes", "requests", "ddos"} {
		if m[st+".accounting_gap"] != 0 || m[st+".accepted"] != m[st+".admitted"]+m[st+".shed"] {
			t.Errorf("stream %s: gap %v, accepted %v, admitted %v, shed %v", st, m[st+".accounting_gap"], m[st+".accepted"], m[st+".admitted"], m[st+".shed"])
		}
		shed += m[st+".shed"]
		accepted += m[st+".accepted"]
	}
	if shed != m["server.shed"] || accepted != m["server.accepted"] || m["handshakes.attempted"] != m["handshakes.accepted"] ||
		m["handshakes.completed"] != m["handshakes.handshakes_completed"] {
		t.Errorf("streams shed %v accepted %v, server %v %v; metrics %v", shed, accepted, m["server.shed"], m["server.accepted"], m)
	}
	// The report reads the bundle alone.
	renv, rout, rerr := lkTestEnv()
	if code := Run(context.Background(), Loadproof, []string{"report", out}, renv); code != ExitOK {
		t.Fatalf("report: exit %d %s", code, rerr)
	}
	for _, want := range []string{"Capacity evidence (linkkeys harness): seed-000-scaled", "server: started, profile scale, environment verified",
		"passed     ddos.shed_overflow", "verified: every file of", "---- phase 5 combined: phase-05-combined.json", "[held] survival: 1000 of 1000",
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

// startLinkKeysServer starts this test binary's server subcommand with vars in its environment,
// its stdout in a log file, and returns the info file and the log.
func startLinkKeysServer(t *testing.T, vars map[string]string, extra ...string) (info, log string) {
	t.Helper()
	dir := t.TempDir()
	info, log = filepath.Join(dir, "info.json"), filepath.Join(dir, "server.log")
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, append([]string{"server", "--info-file", info, "--db-path", filepath.Join(dir, "db.sqlite3"), "--metrics-interval-secs", "1"}, extra...)...)
	cmd.Stdout, cmd.Stderr = f, f
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TCP_") && !strings.HasPrefix(kv, "PUBLIC_READ_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, childTreeEnv+"=linkkeys")
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		// A server that ignores the interrupt is killed, so no test leaves it behind.
		kill := time.AfterFunc(testwait.Long, func() { _ = cmd.Process.Kill() })
		defer kill.Stop()
		testwait.Call(t, 2*testwait.Long, "the server's exit after SIGINT", func() { _ = cmd.Wait() })
		f.Close()
	})
	for range 200 {
		if fi, err := os.Stat(info); err == nil && fi.Size() > 0 {
			return info, log
		}
		time.Sleep(50 * time.Millisecond)
	}
	b, _ := os.ReadFile(log)
	t.Fatalf("the server did not start:\n%s", b)
	return "", ""
}

// runningPlan is the scaled plan's first phase, 200 held connections, against a running server.
func runningPlan(t *testing.T, info, log string) string {
	t.Helper()
	p, err := capacity.ReadLinkKeysPlan("testdata/linkkeys-capacity-scaled.json")
	if err != nil {
		t.Fatal(err)
	}
	p.Target = plan.LinkKeysTarget{Mode: plan.TargetRunning, InfoFile: info, ServerLog: log}
	p.Phases = p.Phases[:1]
	p.Phases[0].Workload.Held.Count = 200
	p.Phases[0].Checks = p.Phases[0].Checks[:1]
	p.Phases[0].Checks[0].Limit = 200
	p.Phases[0].ExpectedShedding = &plan.ExpectedShedding{Stream: "server", Reasons: []string{"global"}, ExactAccounting: true}
	b, err := p.Encode()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// Against a running server the profile is verified, not trusted: a server running the declared
// profile is measured; one running other limits is not, and the evidence says why.
func TestLinkKeysCapacityAgainstARunningServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers")
	}
	p, err := capacity.ReadLinkKeysPlan("testdata/linkkeys-capacity-scaled.json")
	if err != nil {
		t.Fatal(err)
	}
	scale := p.EnvironmentProfiles["scale"].Variables

	t.Run("as declared", func(t *testing.T) {
		info, log := startLinkKeysServer(t, scale)
		out := filepath.Join(t.TempDir(), "ev")
		env, stdout, stderr := lkTestEnv()
		code := Run(context.Background(), LinkKeys, []string{"capacity", "-p", runningPlan(t, info, log), "-o", out}, env)
		// The phase sheds nothing under the scale profile, so the declared global shedding fails.
		if code != ExitFailure {
			t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
		}
		b, _ := os.ReadFile(filepath.Join(out, capacity.EvidenceFile))
		ev, err := capacity.ReadLinkKeysEvidence(b)
		if err != nil {
			t.Fatal(err)
		}
		ph := ev.Phases[0]
		if !strings.Contains(ph.Server.SourcePrefixesNote, "the server counts no source prefix") || ph.Server.SourcePrefixes != "held=127.0.1.0/28" {
			t.Errorf("server %+v", ph.Server)
		}
		if ph.Server.Mode != "running" || len(ph.Server.Mismatches) != 0 || !ph.Server.EnvironmentVerified || ph.Checks[0].Outcome != capacity.Passed ||
			ph.Checks[1].Metric != "server.shed_global" || ph.Checks[1].Outcome != capacity.Failed {
			t.Fatalf("phase %+v\nserver %+v", ph.Checks, ph.Server)
		}
		if err := capacity.VerifyBundle(out); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("other limits", func(t *testing.T) {
		info, log := startLinkKeysServer(t, map[string]string{"TCP_HANDSHAKE_GLOBAL_BURST": "5"})
		out := filepath.Join(t.TempDir(), "ev")
		env, stdout, stderr := lkTestEnv()
		code := Run(context.Background(), LinkKeys, []string{"capacity", "-p", runningPlan(t, info, log), "-o", out}, env)
		if code != ExitCouldNotRun || !strings.Contains(stdout.String(), "runs other limits than profile") {
			t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
		}
		b, _ := os.ReadFile(filepath.Join(out, capacity.EvidenceFile))
		ev, err := capacity.ReadLinkKeysEvidence(b)
		if err != nil {
			t.Fatal(err)
		}
		s := ev.Phases[0].Server
		mm := strings.Join(s.Mismatches, "\n")
		for _, want := range []string{"config: handshake_global_capacity=5, declared handshake_global_capacity=200000",
			"environment: TCP_HANDSHAKE_GLOBAL_BURST=5, declared 200000", "environment: TCP_MAX_CONNECTIONS is unset, but the profile declares 220000"} {
			if !strings.Contains(mm, want) {
				t.Errorf("mismatches lack %q:\n%s", want, mm)
			}
		}
		if ev.Phases[0].Results != nil || ev.StopReason != capacity.StopReasonPhaseError || s.Log == "" {
			t.Fatalf("evidence %+v", ev)
		}
		if err := capacity.VerifyBundle(out); err != nil {
			t.Fatal(err)
		}
	})
}

// Against a remote server (target mode remote: addr, fingerprint, domain, metrics_url; here a real
// server on 127.0.0.1 started first, named only by those) the phases run without an info file or
// log; the server is verified from its metrics endpoint's config: line, and without a metrics URL
// the evidence says the server side was not verified and is not certification-ready.
func TestLinkKeysCapacityAgainstARemoteServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers")
	}
	p, err := capacity.ReadLinkKeysPlan("testdata/linkkeys-capacity-scaled.json")
	if err != nil {
		t.Fatal(err)
	}
	info, _ := startLinkKeysServer(t, p.EnvironmentProfiles["scale"].Variables, "--metrics-addr", "127.0.0.1:0")
	inf, err := linkkeys.ReadInfo(info)
	if err != nil || inf.MetricsAddr == "" {
		t.Fatalf("info %+v %v", inf, err)
	}
	remotePlan := func(metricsURL string) string {
		path := runningPlan(t, info, "unused.log")
		pl, err := capacity.ReadLinkKeysPlan(path)
		if err != nil {
			t.Fatal(err)
		}
		pl.Target = plan.LinkKeysTarget{Mode: plan.TargetRemote, Addr: fmt.Sprintf("127.0.0.1:%d", inf.Port), Fingerprint: inf.Fingerprint,
			Domain: inf.Domain, MetricsURL: metricsURL}
		b, err := pl.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	run := func(t *testing.T, metricsURL string) (*capacity.LinkKeysEvidence, string) {
		out := filepath.Join(t.TempDir(), "ev")
		env, stdout, stderr := lkTestEnv()
		code := Run(context.Background(), LinkKeys, []string{"capacity", "-p", remotePlan(metricsURL), "-o", out}, env)
		if code != ExitOK && code != ExitFailure {
			t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
		}
		b, _ := os.ReadFile(filepath.Join(out, capacity.EvidenceFile))
		ev, err := capacity.ReadLinkKeysEvidence(b)
		if err != nil {
			t.Fatal(err)
		}
		if err := capacity.VerifyBundle(out); err != nil {
			t.Fatal(err)
		}
		ph := ev.Phases[0]
		if ph.Server == nil || ph.Server.Mode != "remote" || ph.Server.Target != fmt.Sprintf("127.0.0.1:%d", inf.Port) || ph.Error != nil ||
			ph.Checks[0].Metric != "held.established" || ph.Checks[0].Outcome != capacity.Passed {
			t.Fatalf("phase %+v\nserver %+v", ph.Checks, ph.Server)
		}
		return ev, out
	}
	t.Run("verified from its metrics URL", func(t *testing.T) {
		ev, _ := run(t, "http://"+inf.MetricsAddr+"/metrics")
		s := ev.Phases[0].Server
		if !s.ServerVerified || !strings.HasPrefix(s.ConfigLine, "config: ") || len(s.Mismatches) != 0 || s.EnvironmentVerified {
			t.Fatalf("server %+v", s)
		}
		if strings.Contains(strings.Join(ev.CertificationBlockers, "\n"), "not verified") {
			t.Errorf("blockers %q", ev.CertificationBlockers)
		}
		// The server's own accounting was read from the URL.
		if v, ok := ev.Phases[0].Metrics["server.accepted"]; !ok || v < 200 {
			t.Errorf("server.accepted %v %v", v, ok)
		}
	})
	t.Run("not verified without one", func(t *testing.T) {
		ev, out := run(t, "")
		s := ev.Phases[0].Server
		if s.ServerVerified || ev.CertificationReady || !strings.Contains(strings.Join(ev.CertificationBlockers, "\n"),
			`phase "established": the server side was not verified: the target names no metrics_url`) {
			t.Fatalf("server %+v\nblockers %q", s, ev.CertificationBlockers)
		}
		renv, rout, rerr := lkTestEnv()
		if code := Run(context.Background(), Loadproof, []string{"report", out}, renv); code != ExitOK && code != ExitFailure {
			t.Fatalf("report: exit %d %s", code, rerr)
		}
		if !strings.Contains(rout.String(), "remote server "+s.Target+": server side NOT verified") {
			t.Errorf("the report does not say the server side was not verified:\n%s", rout)
		}
	})
}
