package coord

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/engine"
	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/keycastload"
	"github.com/loadproof/loadproof/internal/result"
	"github.com/loadproof/loadproof/internal/testwait"
)

// validSpec is a spec every check takes, for the tests to spoil one field at a time.
func validSpec() KeycastSpec {
	return KeycastSpec{URL: "http://127.0.0.1:3000", Concurrency: 4, Requests: 100, DurationMs: 2000, ReportIntervalMs: 1000,
		Method: "sign-event", UsersFile: "/runs/users.json"}
}

// TestKeycastSpecCarriesTheRun: a run configuration survives the trip to a worker (spec, JSON,
// strict decode, run configuration) with its TLS options, rate ramp and http client; a register
// run names no users file.
func TestKeycastSpecCarriesTheRun(t *testing.T) {
	t.Parallel()
	cfg := keycastload.RunConfig{URL: "https://127.0.0.1:8443", Concurrency: 6, Requests: 50, Duration: 3 * time.Second,
		RampUp: 1500 * time.Millisecond, Seed: 9, ReportInterval: 2 * time.Second, Scenario: keycast.ScenarioWarmCache,
		Method: keycast.MethodGetPublicKey, UsersFile: "/runs/u.json", Rate: 40, RateFrom: 5, HTTPTimeout: 750 * time.Millisecond,
		HTTPClient: keycastload.HTTPClientStd, TLS: keycastload.TLSOptions{CACertFile: "/etc/ssl/private-ca.pem"},
		Flags: map[string]string{"dashboard": "0.0.0.0:1"}, Stop: &keycastload.StopConditions{MaxLatencyP95Ms: 5}}
	b, err := json.Marshal(NewKeycastSpec(cfg))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "dashboard") || strings.Contains(string(b), "p95") {
		t.Errorf("a spec carries the command line's flags or stop conditions: %s", b)
	}
	s, err := DecodeKeycastSpec(b)
	if err != nil {
		t.Fatal(err)
	}
	got := s.RunConfig()
	want := cfg
	want.Flags, want.Stop = nil, nil
	if got.URL != want.URL || got.Concurrency != want.Concurrency || got.Requests != want.Requests || got.Duration != want.Duration ||
		got.RampUp != want.RampUp || got.Seed != want.Seed || got.ReportInterval != want.ReportInterval || got.Scenario != want.Scenario ||
		got.Method != want.Method || got.UsersFile != want.UsersFile || got.Rate != want.Rate || got.RateFrom != want.RateFrom ||
		got.HTTPTimeout != want.HTTPTimeout || got.HTTPClient != want.HTTPClient || got.TLS != want.TLS {
		t.Errorf("run configuration after the trip:\n got %+v\nwant %+v", got, want)
	}
	if f := s.Files(); strings.Join(f, " ") != "/runs/u.json /etc/ssl/private-ca.pem" {
		t.Errorf("files %q", f)
	}
	reg := cfg
	reg.Method, reg.TLS = keycast.MethodRegister, keycastload.TLSOptions{InsecureSkipVerify: true}
	if s := NewKeycastSpec(reg); s.UsersFile != "" || !s.InsecureSkipVerify || len(s.Files()) != 0 {
		t.Errorf("register spec %+v names files %q", s, s.Files())
	}
}

// TestDecodeKeycastSpecRefuses (finding 7): a task carries only the spec's fields, each within its
// bounds; anything else is refused with a message that names the field and the allow list.
func TestDecodeKeycastSpecRefuses(t *testing.T) {
	t.Parallel()
	enc := func(edit func(m map[string]any)) string {
		b, _ := json.Marshal(validSpec())
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		edit(m)
		out, _ := json.Marshal(m)
		return string(out)
	}
	if _, err := DecodeKeycastSpec([]byte(enc(func(map[string]any) {}))); err != nil {
		t.Fatalf("the valid spec: %v", err)
	}
	for _, c := range []struct{ name, in, want string }{
		{"dashboard", enc(func(m map[string]any) { m["dashboard"] = "0.0.0.0:9" }), `field "dashboard" is not one a Keycast task may carry (allowed: url, concurrency`},
		{"output", enc(func(m map[string]any) { m["output"] = "/x/a/b/c.json" }), `field "output"`},
		{"args", enc(func(m map[string]any) { m["args"] = []string{"--dashboard"} }), `field "args"`},
		{"trailing", enc(func(map[string]any) {}) + `{}`, "data after its object"},
		{"empty", " ", "carries no Keycast spec"},
		{"array", `[]`, "not a spec object"},
		{"too big", `{"url":"` + strings.Repeat("a", MaxKeycastSpecBytes) + `"}`, "at most"},
		{"scheme", enc(func(m map[string]any) { m["url"] = "file:///etc/passwd" }), "want an http or https base URL"},
		{"user", enc(func(m map[string]any) { m["url"] = "http://u:p@127.0.0.1/" }), "carries no user"},
		{"no host", enc(func(m map[string]any) { m["url"] = "http:///x" }), "names no host"},
		{"concurrency", enc(func(m map[string]any) { m["concurrency"] = 0 }), "concurrency 0"},
		{"requests", enc(func(m map[string]any) { m["requests"] = -1 }), "requests -1"},
		{"forever", enc(func(m map[string]any) { m["duration_ms"] = 0; m["requests"] = 0 }), "needs requests > 0"},
		{"duration", enc(func(m map[string]any) { m["duration_ms"] = int64(1) << 62 }), "duration_ms"},
		{"interval", enc(func(m map[string]any) { m["report_interval_ms"] = 10 }), "report_interval_ms 10"},
		{"scenario", enc(func(m map[string]any) { m["scenario"] = "bogus" }), "scenario"},
		{"method", enc(func(m map[string]any) { m["method"] = "rm-rf" }), "method"},
		{"rate", enc(func(m map[string]any) { m["rate"] = -2 }), "rate -2"},
		{"rate_from", enc(func(m map[string]any) { m["rate_from"] = 3 }), "rate_from needs rate"},
		{"client", enc(func(m map[string]any) { m["http_client"] = "curl" }), `http_client "curl"`},
		{"no users", enc(func(m map[string]any) { delete(m, "users_file") }), "users_file is empty"},
		{"nul path", enc(func(m map[string]any) { m["users_file"] = "/a\x00b" }), "users_file: not a usable path"},
		{"tls", enc(func(m map[string]any) { m["ca_cert_file"] = "/ca.pem"; m["insecure_skip_verify"] = true }), "contradict"},
		{"type", enc(func(m map[string]any) { m["concurrency"] = "many" }), "not a spec object"},
	} {
		_, err := DecodeKeycastSpec([]byte(c.in))
		if err == nil || !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want a refusal saying %q", c.name, err, c.want)
		}
	}
}

// FuzzDecodeKeycastSpec: any bytes are refused or decode to a spec that is valid, bounded, and
// encodes and decodes to itself.
func FuzzDecodeKeycastSpec(f *testing.F) {
	b, _ := json.Marshal(validSpec())
	f.Add(b)
	f.Add([]byte(`{"url":"https://[::1]:1","concurrency":1,"requests":1,"report_interval_ms":1000,"method":"register"}`))
	f.Add([]byte(`{"url":"http://x","dashboard":"0.0.0.0:1"}`))
	f.Add([]byte(`{"url":"http://x"}{}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		s, err := DecodeKeycastSpec(in)
		if err != nil {
			if !errors.Is(err, ErrRefused) {
				t.Fatalf("a refusal that is not ErrRefused: %v", err)
			}
			return
		}
		if len(in) > MaxKeycastSpecBytes || s.Validate() != nil {
			t.Fatalf("took %q", in)
		}
		again, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		s2, err := DecodeKeycastSpec(again)
		if err != nil || s2 != s {
			t.Fatalf("round trip: %+v -> %+v (%v)", s, s2, err)
		}
	})
}

// keycastWorkers starts n in-process workers that run Keycast specs with run (in place of
// keycastload.Run) and take files from dir.
func keycastWorkers(t *testing.T, url, token string, n int, dir string, run func(context.Context, keycastload.RunConfig) (any, error)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = RunWorker(ctx, WorkerConfig{Conn: ConnConfig{URL: url, Token: token}, Secret: "s", Name: "k" + string(rune('a'+i)), Index: i,
				TaskFiles: []string{dir}, RunKeycast: run})
		}()
	}
	t.Cleanup(func() {
		cancel()
		testwait.WaitGroup(t, &wg, testwait.Long, "the workers' ends")
	})
}

// TestKeycastTaskRunsTypedSpec: a Keycast task reaches each worker as its typed spec over a real
// NATS server and runs in the library: each worker runs its own segment from the coordinated start,
// only worker 0 samples the server, its intervals merge live, its result comes back, and the
// manifest records the spec, not a command line.
func TestKeycastTaskRunsTypedSpec(t *testing.T) {
	t.Parallel()
	emb, err := StartEmbedded(EmbeddedConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Close()
	c, err := NewCoordinator(context.Background(), CoordinatorConfig{Conn: ConnConfig{URL: emb.URL, Token: emb.Token}, Secret: "s", Workers: 2,
		JoinTimeout: 20 * time.Second, StartLead: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dir := t.TempDir()
	var mu sync.Mutex
	got := map[int]keycastload.RunConfig{}
	keycastWorkers(t, emb.URL, emb.Token, 2, dir, func(ctx context.Context, cfg keycastload.RunConfig) (any, error) {
		mu.Lock()
		got[cfg.Segment.Index] = cfg
		mu.Unlock()
		lat := hist.New()
		lat.Record(time.Millisecond)
		engine.IntervalObserver(ctx)(&result.Interval{T: 1, Secs: 1, Counts: map[string]int64{"success": 7}, Latency: map[string]*hist.Histogram{"latency": lat}})
		return map[string]any{"segment": cfg.Segment.Index, "url": cfg.URL}, nil
	})
	if err := c.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	spec := validSpec()
	spec.UsersFile = filepath.Join(dir, "users.json")
	tr, err := c.RunKeycastTask(context.Background(), spec, TaskOptions{Describe: "keycast run"})
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range tr.Parts {
		var r struct {
			Segment int    `json:"segment"`
			URL     string `json:"url"`
		}
		if err := json.Unmarshal(p, &r); err != nil || r.Segment != i || r.URL != spec.URL {
			t.Errorf("worker %d result %s (%v)", i, p, err)
		}
	}
	mu.Lock()
	for i := range 2 {
		cfg := got[i]
		if cfg.Segment.Count != 2 || cfg.Start.IsZero() || cfg.NoServerSample != (i != 0) || cfg.UsersFile != spec.UsersFile || cfg.Concurrency != 4 {
			t.Errorf("worker %d ran %+v", i, cfg)
		}
	}
	mu.Unlock()
	if len(tr.Intervals) != 1 || tr.Intervals[0].Counts["success"] != 14 {
		t.Errorf("merged intervals %+v; want one of 14 successes", tr.Intervals)
	}
	rec := c.Record(tr, "keycast run", nil, make([]time.Time, 2))
	b, _ := json.Marshal(rec)
	if rec.Keycast == nil || *rec.Keycast != spec || strings.Contains(string(b), `"args"`) {
		t.Errorf("task record %s", b)
	}
}

// TestWorkerRefusalsRecorded (issue 26: tasks carry any flag): a worker refuses a Keycast task
// outside its allow list, its file rule or its host rules, each time saying why; the coordinator
// records every refusal of its own tasks (TaskRefusals) and each worker's count of refused
// messages, and counts a repeated result as a duplicate, for the coordination manifest.
func TestWorkerRefusalsRecorded(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs whole coordinated tasks over NATS for seconds (-short)")
	}
	emb, err := StartEmbedded(EmbeddedConfig{NoJetStream: true})
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Close()
	h := newHostile(t, emb.URL, emb.Token)
	c, err := NewCoordinator(context.Background(), CoordinatorConfig{Conn: ConnConfig{URL: emb.URL, Token: emb.Token}, Secret: "s", Workers: 2,
		JoinTimeout: 20 * time.Second, StartLead: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dir := t.TempDir()
	release := make(chan struct{})
	ran := make(chan int, 4)
	keycastWorkers(t, emb.URL, emb.Token, 2, dir, func(ctx context.Context, cfg keycastload.RunConfig) (any, error) {
		ran <- cfg.Segment.Index
		if cfg.Segment.Index == 1 {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return map[string]int{"segment": cfg.Segment.Index}, nil
	})
	if err := c.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}

	// Sealed tasks (as the coordinator, the holder of the secret) with a field outside the allow
	// list, and others.
	forger := c.sig
	id := 100
	send := func(task Task) string {
		t.Helper()
		id++
		task.ID, task.Segment, task.StartAt = id, result.Segment{Index: 0, Count: 2}, time.Now().Add(time.Minute)
		m, err := forger.msg(c.subj.worker(0, "task"), task)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := h.nc.RequestMsg(m, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var r TaskReply
		if err := json.Unmarshal(resp.Data, &r); err != nil || r.Accepted {
			t.Errorf("task %s: accepted %v (%v)", task.Keycast, r.Accepted, err)
		}
		return r.Reason
	}
	good, _ := json.Marshal(validSpec())
	withField := strings.TrimSuffix(string(good), "}") + `,"dashboard":"0.0.0.0:9"}`
	shadow := validSpec()
	shadow.UsersFile = "/etc/shadow"
	bShadow, _ := json.Marshal(shadow)
	far := validSpec()
	far.URL, far.UsersFile = "http://198.18.0.9:3000", filepath.Join(dir, "u.json")
	bFar, _ := json.Marshal(far)
	for _, c := range []struct {
		task Task
		want string
	}{
		{Task{Keycast: json.RawMessage(withField)}, `field "dashboard" is not one a Keycast task may carry`},
		{Task{Keycast: bShadow}, `"/etc/shadow" is outside this worker's --task-files`},
		{Task{Keycast: bFar}, "198.18.0.9"},
		{Task{Keycast: good, Args: lkTask}, "both a Keycast spec and a command"},
		{Task{Args: []string{"keycast", "run", "--dashboard", "0.0.0.0:9"}}, "typed spec"},
		{Task{Args: lkTask}, "runs no LinkKeys tasks"},
	} {
		if r := send(c.task); !strings.Contains(r, c.want) {
			t.Errorf("refusal %q; want it to say %q", r, c.want)
		}
	}
	select {
	case i := <-ran:
		t.Fatalf("worker %d ran a refused task", i)
	default:
	}

	// The coordinator's own task, refused by both workers' host rules, is recorded.
	if _, err := c.RunKeycastTask(context.Background(), far, TaskOptions{Describe: "far"}); err == nil || !strings.Contains(err.Error(), "198.18.0.9") {
		t.Fatalf("a task to a host no worker allows: %v", err)
	}
	refs := c.TaskRefusals()
	if len(refs) != 2 || refs[0].Task != refs[1].Task || refs[0].Index == refs[1].Index ||
		!strings.Contains(refs[0].Reason, "198.18.0.9") || !strings.Contains(refs[1].Reason, "198.18.0.9") {
		t.Errorf("task refusals %+v; want both workers' reasons for one task", refs)
	}

	// A good task; while worker 1 still runs, a sealed repeat of worker 0's result is a duplicate.
	done := make(chan error, 1)
	spec := validSpec()
	spec.UsersFile = filepath.Join(dir, "u.json")
	go func() {
		tr, err := c.RunKeycastTask(context.Background(), spec, TaskOptions{Describe: "good"})
		if err == nil && (tr.Parts[0] == nil || tr.Parts[1] == nil) {
			err = errors.New("a worker's result is missing")
		}
		done <- err
	}()
	deadline := time.After(20 * time.Second)
	var results int
	for results < 1 {
		select {
		case <-deadline:
			t.Fatal("worker 0's result announcement never came")
		case <-time.After(20 * time.Millisecond):
			results = len(h.captured("." + c.Run() + ".result"))
		}
	}
	orig := h.captured("." + c.Run() + ".result")[0]
	var first ResultMsg
	if err := json.Unmarshal(orig.Data, &first); err != nil || first.Index != 0 {
		t.Fatalf("the first result %+v (%v); want worker 0's", first, err)
	}
	// Sealed as worker 0 would seal a resend: its sequence number a little above the original's,
	// so worker 0's own later messages stay fresh.
	n, err := strconv.ParseUint(orig.Header.Get(hdrN), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	w0 := newSigner("s", workerFrom(0))
	w0.bind(c.Run(), workerFrom(0))
	w0.n.Store(n + 1000)
	m, _ := w0.msg(c.subj.sub("result"), first)
	if _, err := h.nc.RequestMsg(m, 5*time.Second); err != nil {
		t.Fatalf("a sealed repeat of worker 0's result %+v: %v (refusals %v)", first, err, c.Refusals())
	}
	close(release)
	if err := testwait.Recv(t, done, testwait.Long, "the task's end"); err != nil {
		t.Fatal(err)
	}
	if n := c.Refusals()[RefusedDuplicate]; n != 1 {
		t.Errorf("duplicate results counted %d; want 1 (%v)", n, c.Refusals())
	}
	// Worker 0 refused 6 tasks and worker 1 the coordinator's one; they say so on their heartbeats.
	for tick := time.NewTicker(50 * time.Millisecond); ; {
		ws := c.Workers()
		if ws[0].Refused[RefusedTask] == 7 && ws[1].Refused[RefusedTask] == 1 {
			tick.Stop()
			break
		}
		select {
		case <-deadline:
			t.Fatalf("worker refusal counts %v, %v; want task 7 and 1", ws[0].Refused, ws[1].Refused)
		case <-tick.C:
		}
	}
	// All of it reaches the coordination manifest as written.
	path := filepath.Join(t.TempDir(), "m.json")
	if err := WriteManifest(path, c.Manifest([]string{"keycast", "run"}, time.Now(), 0, nil)); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var man struct {
		Format  string           `json:"format"`
		Refused map[string]int64 `json:"refused_messages"`
		Workers []struct {
			Refused map[string]int64 `json:"refused_messages"`
		} `json:"workers"`
		TaskRefusals []TaskRefusal `json:"worker_refusals"`
	}
	if err := json.Unmarshal(b, &man); err != nil || man.Format != ManifestFormat || man.Refused[RefusedDuplicate] != 1 ||
		len(man.Workers) != 2 || man.Workers[0].Refused[RefusedTask] != 7 || len(man.TaskRefusals) != 2 {
		t.Errorf("manifest (%v):\n%s", err, b)
	}
}
