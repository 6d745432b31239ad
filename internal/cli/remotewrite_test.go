package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/capacity"
	"github.com/loadproof/loadproof/internal/keycastserver"
	"github.com/loadproof/loadproof/internal/keycastserver/kctest"
	"github.com/loadproof/loadproof/internal/linkkeysload"
	"github.com/loadproof/loadproof/internal/linkkeysresult"
	"github.com/loadproof/loadproof/internal/linkkeysserver"
	"github.com/loadproof/loadproof/internal/remotewrite"
	"github.com/loadproof/loadproof/internal/search"
	"github.com/loadproof/loadproof/internal/testwait"
)

// startPrometheus starts a real Prometheus (Debian's package; scripts/prometheus.sh installs it) on
// a free loopback port with the remote-write receiver and native histograms, and returns its base
// URL. Without the binary the test skips, except in CI, where it fails.
func startPrometheus(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("prometheus is not installed: scripts/prometheus.sh installs it")
		}
		t.Skip("prometheus is not installed (scripts/prometheus.sh installs it)")
	}
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte("global:\n  scrape_interval: 1h\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr,
		"--web.enable-remote-write-receiver", "--enable-feature=native-histograms", "--log.level=warn")
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		testwait.Call(t, testwait.Long, "the killed prometheus's exit", func() { _ = cmd.Wait() })
	})
	base := "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return base
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus on %s not ready within 30 s: %v", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// promQuery runs an instant query and returns the single result's value.
func promQuery(t *testing.T, base, q string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if doc.Status != "success" || len(doc.Data.Result) != 1 {
		t.Fatalf("query %s: %s %s, %d results", q, doc.Status, doc.Error, len(doc.Data.Result))
	}
	v, err := strconv.ParseFloat(fmt.Sprint(doc.Data.Result[0].Value[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestRemoteWriteToARealPrometheus: a request-bench run streams to a real Prometheus; the totals
// Prometheus holds equal the result file's exactly, and the p99 from the native histogram agrees
// with the result's HDR p99 within the native histogram's resolution.
func TestRemoteWriteToARealPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real Prometheus (-short)")
	}
	base := startPrometheus(t)
	info, dir := lkInfoServer(t, linkkeysserver.TestServerOptions{})
	jsonPath := filepath.Join(dir, "rb.json")
	env, out, errOut := lkTestEnv()
	if code := Run(context.Background(), LinkKeys, []string{"request-bench", "--info-file", info, "--connections", "2", "--duration", "3s",
		"--json", jsonPath, "--remote-write", base + "/api/v1/write"}, env); code != ExitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(errOut.String(), "dropped 0") && !strings.Contains(errOut.String(), ", 0 dropped, 0 failed") {
		t.Fatalf("remote write stats: %s", errOut)
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	res, err := linkkeysload.ReadResult(b)
	if err != nil {
		t.Fatal(err)
	}
	if rw := res.RemoteWrite; rw == nil || rw.Sent == 0 || rw.Dropped != 0 || rw.Failed != 0 || !strings.HasSuffix(rw.URL, "/api/v1/write") {
		t.Errorf("the result's remote_write: %+v", res.RemoteWrite)
	}
	sel := fmt.Sprintf(`{run_id=%q}`, res.RunID)
	if got := promQuery(t, base, "sum(loadproof_operations_total"+sel+")"); int64(got) != res.Total() {
		t.Errorf("Prometheus total %v, result file %d", got, res.Total())
	}
	if got := promQuery(t, base, `sum(loadproof_operations_total{outcome="success",run_id="`+res.RunID+`"})`); int64(got) != res.Totals["success"] {
		t.Errorf("Prometheus successes %v, result file %d", got, res.Totals["success"])
	}
	hdr := res.Histograms["request"].Quantile(0.99).Seconds()
	prom := promQuery(t, base, `histogram_quantile(0.99, loadproof_latency_seconds{kind="request",run_id="`+res.RunID+`"})`)
	// One native bucket at schema 4 spans a factor of 2^(1/16); the HDR value sits in one, the
	// quantile is interpolated within it: they agree within that factor (and the HDR's 0.1 %).
	tol := math.Pow(2, 1.0/(1<<remotewrite.Schema))*1.001 - 1
	if math.Abs(prom-hdr)/hdr > tol {
		t.Errorf("p99: Prometheus %.6fs, HDR %.6fs: apart by more than %.1f %%", prom, hdr, tol*100)
	}
	t.Logf("p99 Prometheus %.6fs, HDR %.6fs; total %d", prom, hdr, res.Total())
}

// TestRemoteWriteNeverSlowsTheRun: an endpoint that accepts and never answers neither slows nor
// stops the run; the command says what it could not deliver.
func TestRemoteWriteNeverSlowsTheRun(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out a dead remote-write endpoint (-short)")
	}
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close() // hold it open, never answer
		}
	}()
	info, _ := lkInfoServer(t, linkkeysserver.TestServerOptions{})
	env, out, errOut := lkTestEnv()
	start := time.Now()
	jsonPath := filepath.Join(t.TempDir(), "hs.json")
	code := Run(context.Background(), LinkKeys, []string{"handshake-bench", "--info-file", info, "--duration", "2s", "--concurrency", "2",
		"--json", jsonPath, "--remote-write", "http://" + l.Addr().String() + "/api/v1/write?token=secret",
		"--remote-write-header", "Authorization: Bearer hunter2"}, env)
	took := time.Since(start)
	if code != ExitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	// 2 s of run, then at most the 10 s drain wait: never the retries of every request in turn.
	if took > 14*time.Second {
		t.Errorf("the run took %v with a silent endpoint", took)
	}
	if !strings.Contains(errOut.String(), "remote write: 0 requests sent") {
		t.Errorf("stderr does not say nothing was delivered:\n%s", errOut)
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte("secret")) || bytes.Contains(b, []byte("hunter2")) {
		t.Errorf("the result file holds the endpoint's token or the Authorization header")
	}
	res, err := linkkeysload.ReadResult(b)
	if err != nil {
		t.Fatal(err)
	}
	if rw := res.RemoteWrite; rw == nil || rw.Sent != 0 || rw.Dropped+rw.Failed+rw.Pending == 0 || strings.Contains(rw.URL, "secret") {
		t.Errorf("the result's remote_write: %+v", res.RemoteWrite)
	}
}

// TestRemoteWriteCapacityPhases: a capacity plan streams each phase under its own phase label,
// counting from zero; each phase's result file records its own delivery, and Prometheus holds each
// phase's total exactly as its file does. A --remote-write-label rides on every series.
func TestRemoteWriteCapacityPhases(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prometheus and a capacity run")
	}
	base := startPrometheus(t)
	t.Setenv(childTreeEnv, "linkkeys")
	p, err := capacity.ReadLinkKeysPlan("testdata/linkkeys-capacity-scaled.json")
	if err != nil {
		t.Fatal(err)
	}
	p.Phases = p.Phases[1:3] // handshake rate, request rate
	pb, err := p.Encode()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	planPath, out := filepath.Join(dir, "plan.json"), filepath.Join(dir, "ev")
	if err := os.WriteFile(planPath, pb, 0o644); err != nil {
		t.Fatal(err)
	}
	tag := fmt.Sprintf("cap%d", time.Now().UnixNano())
	env, stdout, stderr := lkTestEnv()
	code := Run(context.Background(), LinkKeys, []string{"capacity", "--plan", planPath, "--output", out,
		"--remote-write", base + "/api/v1/write", "--remote-write-label", "test_id=" + tag}, env)
	if code != ExitOK && code != ExitFailure {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	b, err := os.ReadFile(filepath.Join(out, capacity.EvidenceFile))
	if err != nil {
		t.Fatal(err)
	}
	ev, err := capacity.ReadLinkKeysEvidence(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.Phases) != 2 {
		t.Fatalf("%d phases ran:\n%s", len(ev.Phases), stderr)
	}
	for _, ph := range ev.Phases {
		rb, err := os.ReadFile(filepath.Join(out, ph.ResultsFile))
		if err != nil {
			t.Fatal(err)
		}
		res, err := search.ParseResult(rb)
		if err != nil {
			t.Fatal(err)
		}
		if rw := res.RemoteWrite; rw == nil || rw.Sent == 0 || rw.Dropped != 0 || rw.Failed != 0 {
			t.Errorf("phase %s: remote_write %+v", ph.Name, res.RemoteWrite)
		}
		sel := fmt.Sprintf(`{test_id=%q,phase=%q,command="capacity"}`, tag, ph.Name)
		if got := promQuery(t, base, "sum(loadproof_operations_total"+sel+")"); int64(got) != res.Total() || res.Total() == 0 {
			t.Errorf("phase %s: Prometheus total %v, its file %d", ph.Name, got, res.Total())
		}
	}
}

// TestRemoteWriteSearchTrials: search hands --remote-write to every trial, each under its own phase
// label and the search's search_id; Prometheus holds each trial's total exactly as its file does.
// A client command that carries --remote-write itself is refused.
func TestRemoteWriteSearchTrials(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prometheus and runs trials")
	}
	base := startPrometheus(t)
	srv := kctest.Start(t, keycastserver.Config{})
	dir := t.TempDir()
	users := filepath.Join(dir, "users.json")
	if code, _, errs := kcRun(t, "setup", "--url", srv.URL, "--users", "2", "-c", "2", "-o", users); code != ExitOK {
		t.Fatalf("setup exit %d: %s", code, errs)
	}
	client := []string{"keycast", "run", "--url", srv.URL, "--users-file", users, "-d", "1", "--ramp-up", "0", "-m", "get-public-key"}
	code, _, errs := lpRun(t, append([]string{"search", "--vary", "rate", "--from", "20", "--to", "40", "--trials", "1",
		"--slo", "errors<50%", "-o", filepath.Join(dir, "x.json"), "--"}, append(client, "--remote-write", base+"/api/v1/write")...)...)
	if code != ExitUsage || !strings.Contains(errs, "give --remote-write to search") {
		t.Fatalf("client's own --remote-write: exit %d: %s", code, errs)
	}
	out := filepath.Join(dir, "search.json")
	code, stdout, errs := lpRun(t, append([]string{"search", "--vary", "rate", "--from", "20", "--to", "40", "--trials", "1",
		"--slo", "errors<50%", "--resamples", "50", "-o", out, "--remote-write", base + "/api/v1/write", "--remote-write-label", "team=load", "--"}, client...)...)
	if code != ExitOK {
		t.Fatalf("search exit %d\n%s\n%s", code, stdout, errs)
	}
	_, idText, ok := strings.Cut(errs, "search_id=")
	if !ok {
		t.Fatalf("stderr names no search_id:\n%s", errs)
	}
	id, err := strconv.Unquote(strings.Fields(idText)[0])
	if err != nil {
		t.Fatal(err)
	}
	res, err := search.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Steps) < 2 {
		t.Fatalf("%d steps", len(res.Steps))
	}
	for _, st := range res.Steps {
		for _, tr := range st.Trials {
			env, err := search.ReadResultFile(filepath.Join(dir, "search-bundle", tr.File))
			if err != nil {
				t.Fatal(err)
			}
			if env.RemoteWrite == nil || env.RemoteWrite.Sent == 0 || env.RemoteWrite.Failed+env.RemoteWrite.Dropped+env.RemoteWrite.Pending != 0 {
				t.Errorf("trial %s: remote_write %+v", tr.File, env.RemoteWrite)
			}
			phase := fmt.Sprintf("step %d trial %d (rate=%s)", st.Index, tr.Trial, search.FormatValue(st.Value))
			sel := fmt.Sprintf(`{search_id=%q,phase=%q,team="load"}`, id, phase)
			if got := promQuery(t, base, "sum(loadproof_operations_total"+sel+")"); int64(got) != env.Total() || env.Total() == 0 {
				t.Errorf("trial %s (%s): Prometheus total %v, its file %d", tr.File, phase, got, env.Total())
			}
		}
	}
}

// TestRemoteWriteConnectionsHeld: a connections run streams the connections it holds through the
// hold as loadproof_connections_held; Prometheus's highest reading is the run's held count.
func TestRemoteWriteConnectionsHeld(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prometheus and a connections run")
	}
	if remotewrite.HeldGauge != linkkeysresult.GaugeHeld || remotewrite.StreamSep != linkkeysresult.StreamSep {
		t.Fatalf("remotewrite's gauge names (%q, %q) differ from linkkeysresult's (%q, %q)",
			remotewrite.HeldGauge, remotewrite.StreamSep, linkkeysresult.GaugeHeld, linkkeysresult.StreamSep)
	}
	base := startPrometheus(t)
	info, dir := lkInfoServer(t, linkkeysserver.TestServerOptions{})
	jsonPath := filepath.Join(dir, "c.json")
	env, out, errOut := lkTestEnv()
	if code := Run(context.Background(), LinkKeys, []string{"connections", "--info-file", info, "--count", "20", "--hold", "3s",
		"--json", jsonPath, "--remote-write", base + "/api/v1/write"}, env); code != ExitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	res, err := linkkeysload.ReadResult(b)
	if err != nil {
		t.Fatal(err)
	}
	var held int64
	for _, iv := range res.Intervals {
		held = max(held, iv.Gauges[linkkeysresult.GaugeHeld])
	}
	if held != 20 {
		t.Fatalf("the result's timeline holds at most %d connections; want 20", held)
	}
	got := promQuery(t, base, fmt.Sprintf(`max_over_time(loadproof_connections_held{run_id=%q}[10m])`, res.RunID))
	if int64(got) != held {
		t.Errorf("Prometheus's highest loadproof_connections_held %v; the result held %d", got, held)
	}
}

// TestRemoteWriteCoordinated: a coordinated run streams once, from the coordinator: the merged
// series count every request once (equal to the merged result file), and per-worker series split
// them by load machine (each worker's equal to its own segment, together the whole).
func TestRemoteWriteCoordinated(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prometheus, NATS and workers")
	}
	base := startPrometheus(t)
	srv := kctest.Start(t, keycastserver.Config{})
	users := kcUsers(t, srv.URL, 4)
	out := filepath.Join(t.TempDir(), "m.json")
	code, errs := umbrella(context.Background(), t, "coordinate", "--workers", "3", "--start-lead", "500ms", "--",
		"keycast", "run", "--url", srv.URL, "--users-file", users, "-d", "0", "-n", "301", "-c", "6", "-m", "get-public-key",
		"--ramp-up", "0", "-o", out, "--remote-write", base+"/api/v1/write")
	if code != ExitOK {
		t.Fatalf("coordinate exit %d: %s", code, errs)
	}
	m := readResults(t, out)
	if m.RunID == "" || m.Total() != 301 {
		t.Fatalf("merged result: run %q, %d requests", m.RunID, m.Total())
	}
	sel := fmt.Sprintf(`{run_id=%q}`, m.RunID)
	if got := promQuery(t, base, "sum(loadproof_operations_total"+sel+")"); int64(got) != m.Total() {
		t.Errorf("merged series: Prometheus %v, result %d", got, m.Total())
	}
	if got := promQuery(t, base, "sum(loadproof_worker_operations_total"+sel+")"); int64(got) != m.Total() {
		t.Errorf("per-worker series: Prometheus %v in all, result %d", got, m.Total())
	}
	if got := promQuery(t, base, "count(count by (worker) (loadproof_worker_operations_total"+sel+"))"); got != 3 {
		t.Errorf("per-worker series name %v workers; want 3", got)
	}
}
