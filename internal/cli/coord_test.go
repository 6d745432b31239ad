package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/capacity"
	"github.com/loadproof/loadproof/internal/coord"
	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/keycastresult"
	"github.com/loadproof/loadproof/internal/keycastserver"
	"github.com/loadproof/loadproof/internal/keycastserver/kctest"
	"github.com/loadproof/loadproof/internal/result"
	"github.com/loadproof/loadproof/internal/testwait"
)

// mainEnv set makes the test binary run the loadproof command tree instead of the tests, so the
// coordinator's local workers (and the tests' own worker processes) are real processes of it.
const mainEnv = "LOADPROOF_CLI_TEST_MAIN"

// safeBuf is a bytes.Buffer safe for the concurrent writes of several processes' stderr.
type safeBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *safeBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *safeBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func umbrella(ctx context.Context, t *testing.T, args ...string) (int, string) {
	t.Helper()
	var errb safeBuf
	return umbrellaTo(ctx, &errb, args...), errb.String()
}

// umbrellaTo is umbrella writing stderr and the log to errb as they come, so that a test can wait
// on a line while the command runs.
func umbrellaTo(ctx context.Context, errb *safeBuf, args ...string) int {
	var out safeBuf
	env := &Env{Stdout: &out, Stderr: errb, Getenv: func(string) string { return "" },
		Logger: slog.New(slog.NewTextHandler(errb, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	return Run(ctx, Loadproof, args, env)
}

// waitForLine waits until buf holds want, failing the test at the deadline.
func waitForLine(t *testing.T, buf *safeBuf, want string, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !strings.Contains(buf.String(), want) {
		select {
		case <-deadline:
			t.Fatalf("no %q within %s; so far:\n%s", want, within, buf.String())
		case <-tick.C:
		}
	}
}

// natsURLs are the servers the distributed tests run against: the embedded one (no --nats) and the
// machine's NATS on 127.0.0.1:4222, or, when that is down, an embedded server started for the test
// and reached like an external one.
func externalNATS(t *testing.T) (url, token string) {
	t.Helper()
	if c, err := net.DialTimeout("tcp", "127.0.0.1:4222", 200*time.Millisecond); err == nil {
		c.Close()
		return "nats://127.0.0.1:4222", ""
	}
	emb, err := coord.StartEmbedded(coord.EmbeddedConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Close)
	return emb.URL, emb.Token
}

// secretFile writes a fresh run secret to a file (mode 0600) for --secret-file.
func secretFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(coord.RandomSecret()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func kcUsers(t *testing.T, url string, n int) string {
	t.Helper()
	users := filepath.Join(t.TempDir(), "users.json")
	if code, errs := umbrella(context.Background(), t, "keycast", "setup", "--url", url, "--users", fmt.Sprint(n), "-c", "2", "-o", users); code != ExitOK {
		t.Fatalf("setup exit %d: %s", code, errs)
	}
	return users
}

func readResults(t *testing.T, path string) *keycastresult.Results {
	t.Helper()
	r, err := keycastresult.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func requestsDelta(t *testing.T, r *keycastresult.Results) uint64 {
	t.Helper()
	if r.ServerMetrics == nil || r.ServerMetrics.Deltas == nil {
		t.Fatalf("no server metrics in the results")
	}
	return r.ServerMetrics.Deltas.HTTPRPCRequestsTotal
}

// TestKeycastSegmentsTileTheRun: the four --segment runs of a count-bound run together send what
// the whole run sends, and the server counts each once.
func TestKeycastSegmentsTileTheRun(t *testing.T) {
	srv := kctest.Start(t, keycastserver.Config{})
	users := kcUsers(t, srv.URL, 4)
	dir := t.TempDir()
	key := filepath.Join(dir, "k")
	if code, errs := umbrella(context.Background(), t, "keygen", "--out", key); code != ExitOK {
		t.Fatal(errs)
	}
	var parts []*keycastresult.Results
	var files []string
	for i := 1; i <= 4; i++ {
		out := filepath.Join(dir, fmt.Sprintf("seg%d.json", i))
		code, errs := umbrella(context.Background(), t, "keycast", "run", "--url", srv.URL, "--users-file", users, "-d", "0", "-n", "101",
			"-c", "6", "-m", "get-public-key", "--ramp-up", "0", "--segment", fmt.Sprintf("%d/4", i), "-o", out,
			"--run-id", testRunID, "--sign-key", key+".key")
		if code != ExitOK {
			t.Fatalf("segment %d exit %d: %s", i, code, errs)
		}
		parts = append(parts, readResults(t, out))
		files = append(files, out)
		if parts[i-1].RunID != testRunID {
			t.Fatalf("segment %d carries run ID %q", i, parts[i-1].RunID)
		}
	}
	// Every segment is signed; report merges the four, and calls three of them partial.
	if code, errs := umbrella(context.Background(), t, append([]string{"verify", "--key", key + ".pub"}, files...)...); code != ExitOK {
		t.Fatalf("verify of signed segments: exit %d: %s", code, errs)
	}
	if code, errs := umbrella(context.Background(), t, append([]string{"report"}, files...)...); code != ExitOK {
		t.Fatalf("report of four segments: exit %d: %s", code, errs)
	}
	if code, errs := umbrella(context.Background(), t, append([]string{"report", "--format", "json", "-o", filepath.Join(dir, "part.json")}, files[:3]...)...); code != ExitOK {
		t.Fatalf("report of three segments: exit %d: %s", code, errs)
	}
	if p := readResults(t, filepath.Join(dir, "part.json")); !p.Partial || len(p.MissingSegments) != 1 || p.MissingSegments[0].Index != 3 {
		t.Fatalf("three of four segments merged: partial %v missing %v", p.Partial, p.MissingSegments)
	}
	m, err := keycastresult.Merge(parts)
	if err != nil {
		t.Fatal(err)
	}
	if m.Summary.TotalRequests != 101 || m.Metadata.Concurrency != 6 {
		t.Fatalf("merged segments: %d requests at concurrency %d; want 101 at 6", m.Summary.TotalRequests, m.Metadata.Concurrency)
	}
	for i, p := range parts {
		if want := (result.Segment{Index: i, Count: 4}).Share(101); int64(p.Summary.TotalRequests) != want {
			t.Errorf("segment %d sent %d; want its share %d", i+1, p.Summary.TotalRequests, want)
		}
	}
}

// TestCoordinateKeycastRun runs one count-bound Keycast run in one process and over four worker
// processes, on the embedded NATS and on an external one: the merged counts equal the single run's,
// the merged histogram holds every worker's samples, and the server counted what the clients sent.
func TestCoordinateKeycastRun(t *testing.T) {
	srv := kctest.Start(t, keycastserver.Config{})
	users := kcUsers(t, srv.URL, 6)
	dir := t.TempDir()
	base := []string{"keycast", "run", "--url", srv.URL, "--users-file", users, "-d", "0", "-n", "803", "-c", "8",
		"-m", "get-public-key", "-s", "mixed", "--seed", "7", "--ramp-up", "0"}
	single := filepath.Join(dir, "single.json")
	if code, errs := umbrella(context.Background(), t, append(base, "-o", single)...); code != ExitOK {
		t.Fatalf("single run exit %d: %s", code, errs)
	}
	one := readResults(t, single)

	extURL, extToken := externalNATS(t)
	for _, tc := range []struct {
		name string
		nats []string
	}{
		{"embedded", nil},
		{"external", []string{"--nats", extURL, "--nats-token", extToken, "--spawn", "--prefix", "lptest" + fmt.Sprint(time.Now().UnixNano())}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, tc.name+".json")
			args := append([]string{"coordinate", "--workers", "4", "--start-lead", "500ms"}, tc.nats...)
			args = append(append(append(args, "--"), base...), "-o", out)
			code, errs := umbrella(context.Background(), t, args...)
			if code != ExitOK {
				t.Fatalf("coordinate exit %d: %s", code, errs)
			}
			m := readResults(t, out)
			if m.Summary.TotalRequests != one.Summary.TotalRequests || m.Summary.SuccessfulRequests != one.Summary.SuccessfulRequests ||
				m.Summary.FailedRequests != one.Summary.FailedRequests || m.Metadata.Concurrency != one.Metadata.Concurrency {
				t.Fatalf("merged %+v\nsingle %+v", m.Summary, one.Summary)
			}
			if got := m.Latency().Count(); got != int64(m.Summary.TotalRequests) {
				t.Errorf("merged histogram holds %d samples for %d requests", got, m.Summary.TotalRequests)
			}
			if len(m.Machines) != 4 || len(m.Segments) != 4 {
				t.Errorf("merged result has %d machine records and %d segments; want 4 each", len(m.Machines), len(m.Segments))
			}
			var ivTotal int64
			for _, iv := range m.Intervals {
				ivTotal += iv.Total()
			}
			if ivTotal != int64(m.Summary.TotalRequests) {
				t.Errorf("merged intervals hold %d requests; want %d", ivTotal, m.Summary.TotalRequests)
			}
			if d := requestsDelta(t, m); d != m.Summary.TotalRequests {
				t.Errorf("the server counted %d requests; the merged clients %d", d, m.Summary.TotalRequests)
			}
			var man coord.Manifest
			b, err := os.ReadFile(out + ".coordination.json")
			if err != nil || json.Unmarshal(b, &man) != nil {
				t.Fatalf("coordination manifest: %v", err)
			}
			if len(man.Workers) != 4 || len(man.Tasks) != 1 || man.ExitCode != 0 {
				t.Fatalf("manifest: %d workers, %d tasks, exit %d", len(man.Workers), len(man.Tasks), man.ExitCode)
			}
			for _, w := range man.Workers {
				if w.Machine.Hostname == "" || w.RTTMs <= 0 {
					t.Errorf("worker %d: machine %q, rtt %v ms", w.Index, w.Machine.Hostname, w.RTTMs)
				}
			}
			// Workers ran a typed spec, not a command line; the result keeps the user's flags.
			if k := man.Tasks[0].Keycast; k == nil || len(man.Tasks[0].Args) != 0 || k.URL != srv.URL || k.Requests != 803 || k.Seed != 7 {
				t.Errorf("manifest task: spec %+v, args %q", k, man.Tasks[0].Args)
			}
			if m.Envelope == nil || m.Envelope.Flags["seed"] != "7" || m.Envelope.Flags["output"] != out {
				t.Errorf("merged result's flags are not the coordinator's command line: %v", m.Envelope)
			}
			if len(man.TaskRefusals) != 0 {
				t.Errorf("worker refusals %+v", man.TaskRefusals)
			}
			t.Logf("transport %s, start skew %.2f ms", man.Transport, man.Tasks[0].StartSkewMs)
		})
	}
}

// TestCoordinateCapacityStop runs a capacity plan over four workers against a target that refuses
// every token: the coordinator's merged window breaches the error-rate stop condition, every worker
// is aborted, and the evidence says the first phase was stopped live.
func TestCoordinateCapacityStop(t *testing.T) {
	srv := kctest.Start(t, keycastserver.Config{})
	dir := t.TempDir()
	users := filepath.Join(dir, "users.json")
	var us []keycast.TestUser
	for i := range 4 {
		us = append(us, keycast.TestUser{Pubkey: strings.Repeat(fmt.Sprintf("%02x", i+1), 32), Email: fmt.Sprintf("u%d@test.local", i), UcanToken: "not-a-token"})
	}
	if err := keycast.WriteUsersFile(users, &keycast.UsersFile{Users: us}); err != nil {
		t.Fatal(err)
	}
	p, err := capacity.ReadPlan("../../docs/capacity-plan.example.json")
	if err != nil {
		t.Fatal(err)
	}
	p.UsersFile, p.TargetURL = users, srv.URL
	for i := range p.Phases {
		p.Phases[i].DurationSeconds, p.Phases[i].RampUpSeconds, p.Phases[i].Concurrency = 30, 0, 4
		p.Phases[i].Method = keycast.MethodGetPublicKey
	}
	b, _ := p.Encode()
	planPath := filepath.Join(dir, "plan.json")
	if err := os.WriteFile(planPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "evidence")
	start := time.Now()
	code, errs := umbrella(context.Background(), t, "coordinate", "--workers", "4", "--start-lead", "500ms", "--",
		"keycast", "capacity", "--plan", planPath, "--output", out, "--stop-window", "1s")
	if code != ExitFailure {
		t.Fatalf("coordinate exit %d; want %d (stop condition): %s", code, ExitFailure, errs)
	}
	if el := time.Since(start); el > 25*time.Second {
		t.Errorf("the stop took %s: the 30 s phase was not aborted", el)
	}
	eb, err := os.ReadFile(filepath.Join(out, capacity.EvidenceFile))
	if err != nil {
		t.Fatal(err)
	}
	ev, err := capacity.ReadEvidence(eb)
	if err != nil {
		t.Fatal(err)
	}
	if ev.StopReason != capacity.StopReasonStopCondition || len(ev.Phases) != 1 || ev.Phases[0].LiveStop == nil {
		t.Fatalf("evidence: stop %q, %d phases, live stop %v", ev.StopReason, len(ev.Phases), ev.Phases)
	}
	ph := ev.Phases[0].Results
	if len(ph.Machines) != 4 || ph.Latency().Count() != int64(ph.Summary.TotalRequests) {
		t.Errorf("phase results: %d machine records, %d samples for %d requests", len(ph.Machines), ph.Latency().Count(), ph.Summary.TotalRequests)
	}
	if err := capacity.VerifyBundle(out); err != nil {
		t.Errorf("bundle: %v", err)
	}
	if !strings.Contains(errs, "stop condition unintentional_error_rate breached") {
		t.Errorf("no breach line in the coordinator's progress:\n%s", errs)
	}
}

// startWorker starts `loadproof worker` as a process of the test binary.
func startWorker(t *testing.T, stderr io.Writer, args ...string) *exec.Cmd {
	t.Helper()
	c := exec.Command(os.Args[0], append([]string{"worker"}, args...)...)
	c.Stderr = stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Process.Kill()
		testwait.Call(t, testwait.Long, "the killed worker's exit", func() { _ = c.Wait() })
	})
	return c
}

// TestCoordinateWorkerKilled kills one of four worker processes mid-run: the run fails with exit
// 4, names the worker, and keeps the other three's partial results and the manifest.
func TestCoordinateWorkerKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a worker process mid-run (-short)")
	}
	srv := kctest.Start(t, keycastserver.Config{})
	users := kcUsers(t, srv.URL, 4)
	url, token := externalNATS(t)
	prefix := "lpkill" + fmt.Sprint(time.Now().UnixNano())
	secret := coord.RandomSecret()
	var werr safeBuf
	var victim *exec.Cmd
	for i := range 4 {
		c := startWorker(t, &werr, "--nats", url, "--nats-token", token, "--prefix", prefix, "--secret", secret, "--index", fmt.Sprint(i), "--name", fmt.Sprintf("w%d", i),
			"--task-files", filepath.Dir(users))
		if i == 2 {
			victim = c
		}
	}
	out := filepath.Join(t.TempDir(), "partial.json")
	done := make(chan struct{})
	var code int
	var cerr safeBuf
	go func() {
		defer close(done)
		code = umbrellaTo(context.Background(), &cerr, "coordinate", "--workers", "4", "--nats", url, "--nats-token", token, "--prefix", prefix,
			"--secret", secret, "--start-lead", "500ms", "--", "keycast", "run", "--url", srv.URL, "--users-file", users, "-d", "30",
			"-c", "4", "-m", "get-public-key", "--ramp-up", "0", "-o", out)
	}()
	waitForLine(t, &cerr, "t=2s", 30*time.Second) // the run is under way: joined, started, intervals in
	_ = victim.Process.Kill()
	select {
	case <-done:
	case <-time.After(40 * time.Second):
		t.Fatal("the coordinator did not end after a worker was killed")
	}
	if code != ExitWorkerLost {
		t.Fatalf("coordinate exit %d; want %d: %s", code, ExitWorkerLost, cerr.String())
	}
	if !strings.Contains(cerr.String(), "worker 2 (w2) stopped reporting") {
		t.Errorf("the error does not name the lost worker:\n%s", cerr.String())
	}
	m := readResults(t, out)
	if m.Stop == nil || m.Stop.Reason != "worker-lost" || len(m.Machines) != 3 || m.Summary.TotalRequests == 0 {
		t.Fatalf("partial results: stop %+v, %d machines, %d requests", m.Stop, len(m.Machines), m.Summary.TotalRequests)
	}
	var man coord.Manifest
	b, _ := os.ReadFile(out + ".coordination.json")
	if err := json.Unmarshal(b, &man); err != nil || man.Lost == nil || man.Lost.Index != 2 || man.Lost.LastSnapshot == nil {
		t.Fatalf("manifest lost worker: %+v (%v)", man.Lost, err)
	}
}

// TestWorkerStopsWithoutCoordinator: a worker whose coordinator vanishes mid-run (its process
// killed) stops its load and exits within 5 s.
func TestWorkerStopsWithoutCoordinator(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the coordinator heartbeat timeout (-short)")
	}
	srv := kctest.Start(t, keycastserver.Config{})
	users := kcUsers(t, srv.URL, 2)
	url, token := externalNATS(t)
	prefix := "lpcoord" + fmt.Sprint(time.Now().UnixNano())
	var werr safeBuf
	sf := secretFile(t)
	w := startWorker(t, &werr, "--nats", url, "--nats-token", token, "--prefix", prefix, "--index", "0", "--secret-file", sf, "--task-files", filepath.Dir(users))
	co := exec.Command(os.Args[0], "coordinate", "--workers", "1", "--nats", url, "--nats-token", token, "--prefix", prefix, "--start-lead", "200ms", "--secret-file", sf,
		"--manifest", filepath.Join(t.TempDir(), "m.json"), "--", "keycast", "run", "--url", srv.URL, "--users-file", users, "-d", "60", "-c", "2",
		"-m", "get-public-key", "--ramp-up", "0", "-o", filepath.Join(t.TempDir(), "r.json"))
	var cerr safeBuf
	co.Stderr = &cerr
	if err := co.Start(); err != nil {
		t.Fatal(err)
	}
	waitForLine(t, &cerr, "t=2s", 20*time.Second)
	_ = co.Process.Kill()
	testwait.Call(t, testwait.Long, "the killed coordinator's exit", func() { _ = co.Wait() })
	killed := time.Now()
	exited := make(chan error, 1)
	go func() { exited <- w.Wait() }()
	select {
	case <-exited:
		if el := time.Since(killed); el > 5*time.Second {
			t.Errorf("the worker stopped %s after the coordinator died; want within 5 s", el)
		}
	case <-time.After(8 * time.Second):
		t.Fatalf("the worker was still running 8 s after its coordinator died:\n%s", werr.String())
	}
	if !strings.Contains(werr.String(), "coordinator") {
		t.Errorf("worker log does not say why it stopped:\n%s", werr.String())
	}
}

// TestWorkerRefusesUnauthorizedTarget: a task whose target is not local and not the worker's own
// --allow-host is refused, and the coordinator names the worker and the rule.
func TestWorkerRefusesUnauthorizedTarget(t *testing.T) {
	man := filepath.Join(t.TempDir(), "m.json")
	code, errs := umbrella(context.Background(), t, "coordinate", "--workers", "2", "--join-timeout", "30s",
		"--manifest", man, "--",
		"keycast", "run", "--url", "https://keycast.divine.video", "--method", "register", "-d", "1")
	if code == ExitOK || !strings.Contains(errs, "refused production host") {
		t.Fatalf("exit %d; want a refusal naming the production host:\n%s", code, errs)
	}
	// Both workers' refusals, with their reasons, are in the coordination manifest.
	var m coord.Manifest
	if b, err := os.ReadFile(man); err != nil || json.Unmarshal(b, &m) != nil {
		t.Fatalf("manifest: %v", err)
	}
	if len(m.TaskRefusals) != 2 || m.TaskRefusals[0].Index == m.TaskRefusals[1].Index {
		t.Fatalf("worker refusals %+v; want one from each worker", m.TaskRefusals)
	}
	for _, r := range m.TaskRefusals {
		if !strings.Contains(r.Reason, "refused production host") || r.Worker == "" {
			t.Errorf("refusal %+v", r)
		}
	}
	if err := coord.CheckCommand([]string{"keycast", "server"}); err == nil {
		t.Error("a worker would run `keycast server`")
	}
}

// TestCoordinateCapacityWorkerKilled kills one of three workers during a capacity plan's first
// phase: the run exits 4, and the bundle keeps the phase's partial results from the others with
// stop reason worker-lost, verifiable against its manifest.
func TestCoordinateCapacityWorkerKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a worker process mid-plan (-short)")
	}
	srv := kctest.Start(t, keycastserver.Config{})
	users := kcUsers(t, srv.URL, 3)
	dir := t.TempDir()
	p, err := capacity.ReadPlan("../../docs/capacity-plan.example.json")
	if err != nil {
		t.Fatal(err)
	}
	p.UsersFile, p.TargetURL = users, srv.URL
	for i := range p.Phases {
		p.Phases[i].DurationSeconds, p.Phases[i].RampUpSeconds, p.Phases[i].Concurrency = 30, 0, 3
		p.Phases[i].Method = keycast.MethodGetPublicKey
	}
	b, _ := p.Encode()
	planPath := filepath.Join(dir, "plan.json")
	if err := os.WriteFile(planPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	url, token := externalNATS(t)
	prefix := "lpcapkill" + fmt.Sprint(time.Now().UnixNano())
	var werr safeBuf
	var victim *exec.Cmd
	sf := secretFile(t)
	for i := range 3 {
		c := startWorker(t, &werr, "--nats", url, "--nats-token", token, "--prefix", prefix, "--index", fmt.Sprint(i), "--name", fmt.Sprintf("cw%d", i), "--secret-file", sf,
			"--task-files", filepath.Dir(users))
		if i == 1 {
			victim = c
		}
	}
	out := filepath.Join(dir, "evidence")
	done := make(chan struct{})
	var code int
	var cerr safeBuf
	go func() {
		defer close(done)
		code = umbrellaTo(context.Background(), &cerr, "coordinate", "--workers", "3", "--nats", url, "--nats-token", token, "--prefix", prefix,
			"--start-lead", "500ms", "--secret-file", sf, "--", "keycast", "capacity", "--plan", planPath, "--output", out)
	}()
	waitForLine(t, &cerr, "t=2s", 30*time.Second) // the first phase is under way
	_ = victim.Process.Kill()
	select {
	case <-done:
	case <-time.After(40 * time.Second):
		t.Fatal("the coordinator did not end after a worker was killed")
	}
	if code != ExitWorkerLost {
		t.Fatalf("coordinate exit %d; want %d: %s", code, ExitWorkerLost, cerr.String())
	}
	eb, err := os.ReadFile(filepath.Join(out, capacity.EvidenceFile))
	if err != nil {
		t.Fatal(err)
	}
	ev, err := capacity.ReadEvidence(eb)
	if err != nil {
		t.Fatal(err)
	}
	if ev.StopReason != capacity.StopReasonWorkerLost || len(ev.Phases) != 1 || !ev.Phases[0].Interrupted || ev.Phases[0].Results == nil {
		t.Fatalf("evidence: stop %q, %d phases", ev.StopReason, len(ev.Phases))
	}
	if r := ev.Phases[0].Results; len(r.Machines) != 2 || r.Summary.TotalRequests == 0 {
		t.Errorf("partial phase results: %d machine records, %d requests", len(r.Machines), r.Summary.TotalRequests)
	}
	if err := capacity.VerifyBundle(out); err != nil {
		t.Errorf("bundle: %v", err)
	}
	if _, err := os.Stat(out + ".coordination.json"); err != nil {
		t.Error(err)
	}
}
