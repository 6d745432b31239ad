package coord

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/engine"
	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/result"
	"github.com/loadproof/loadproof/internal/testwait"
)

// fakeExec is a worker's Exec that plays a client command: three one-second intervals of ten
// operations each (two seconds' worth faster than real time), then a result of size bytes.
func fakeExec(size int) func(ctx context.Context, args []string, h *Share) error {
	return func(ctx context.Context, args []string, h *Share) error {
		if d := time.Until(h.Start); d > 0 {
			time.Sleep(d)
		}
		for k := range 3 {
			lat := hist.New()
			for range 10 {
				lat.Record(time.Duration(h.Segment.Index+1) * time.Millisecond)
			}
			engine.IntervalObserver(ctx)(&result.Interval{T: float64(k), Secs: 1, Counts: map[string]int64{"success": 10}, Latency: map[string]*hist.Histogram{"latency": lat}})
			select {
			case <-ctx.Done():
				return h.Deliver(map[string]any{"segment": h.Segment, "aborted": true})
			case <-time.After(50 * time.Millisecond):
			}
		}
		return h.Deliver(map[string]any{"segment": h.Segment, "pad": strings.Repeat("x", size)})
	}
}

func startWorkers(t *testing.T, url, token string, n int, exec func(context.Context, []string, *Share) error) (context.CancelFunc, *sync.WaitGroup, []error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = RunWorker(ctx, WorkerConfig{Conn: ConnConfig{URL: url, Token: token}, Secret: "s", Name: "w" + string(rune('a'+i)), Index: -1,
				Exec: exec, Targets: func([]string) ([]string, error) { return []string{"http://127.0.0.1:1"}, nil }})
		}()
	}
	t.Cleanup(func() {
		cancel()
		testwait.WaitGroup(t, &wg, testwait.Long, "the workers' ends")
	})
	return cancel, &wg, errs
}

// TestChunkedResultsWithoutJetStream runs a task on three in-process workers over an embedded NATS
// without JetStream: results larger than a chunk arrive whole, and the live merge holds every
// interval of every worker.
func TestChunkedResultsWithoutJetStream(t *testing.T) {
	t.Parallel()
	emb, err := StartEmbedded(EmbeddedConfig{NoJetStream: true})
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Close()
	var progress bytes.Buffer
	c, err := NewCoordinator(context.Background(), CoordinatorConfig{Conn: ConnConfig{URL: emb.URL, Token: emb.Token}, Secret: "s", Workers: 3,
		JoinTimeout: 20 * time.Second, StartLead: 200 * time.Millisecond, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Transport() != "chunks" {
		t.Fatalf("transport %s without JetStream", c.Transport())
	}
	startWorkers(t, emb.URL, emb.Token, 3, fakeExec(3*ChunkSize/2))
	if err := c.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	tr, err := c.RunTask(context.Background(), lkTask, TaskOptions{Describe: "test"})
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range tr.Parts {
		var got struct {
			Segment result.Segment
			Pad     string
		}
		if err := json.Unmarshal(p, &got); err != nil || got.Segment != (result.Segment{Index: i, Count: 3}) || len(got.Pad) != 3*ChunkSize/2 {
			t.Fatalf("part %d: %v, segment %v, %d bytes of padding", i, err, got.Segment, len(got.Pad))
		}
	}
	if len(tr.Intervals) != 3 {
		t.Fatalf("%d merged intervals; want 3", len(tr.Intervals))
	}
	for k, iv := range tr.Intervals {
		if iv.Counts["success"] != 30 || iv.Latency["latency"].Count() != 30 {
			t.Errorf("interval %d: %v, %d samples", k, iv.Counts, iv.Latency["latency"].Count())
		}
	}
	if !strings.Contains(progress.String(), "t=3s  90 ops") {
		t.Errorf("progress:\n%s", progress.String())
	}
}

// TestStopConditionAbortsEveryWorker: a judge that breaches on the first merged interval aborts
// every worker before its run ends.
func TestStopConditionAbortsEveryWorker(t *testing.T) {
	t.Parallel()
	emb, err := StartEmbedded(EmbeddedConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Close()
	c, err := NewCoordinator(context.Background(), CoordinatorConfig{Conn: ConnConfig{URL: emb.URL, Token: emb.Token}, Secret: "s", Workers: 2,
		StartLead: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	slow := func(ctx context.Context, args []string, h *Share) error {
		for k := 0; ; k++ {
			engine.IntervalObserver(ctx)(&result.Interval{T: float64(k), Secs: 1, Counts: map[string]int64{"network": 5}})
			select {
			case <-ctx.Done():
				return h.Deliver(map[string]bool{"aborted": true})
			case <-time.After(100 * time.Millisecond):
			}
			if k > 100 {
				return errors.New("never aborted")
			}
		}
	}
	startWorkers(t, emb.URL, emb.Token, 2, slow)
	if err := c.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	judge := func(w []result.Interval) *result.StopEvent {
		return &result.StopEvent{Reason: "stop-condition", Metric: "unintentional_error_rate", Observed: 1, Limit: 0.1}
	}
	tr, err := c.RunTask(context.Background(), lkTask, TaskOptions{Judge: judge, Window: 1, IntervalSecs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Stop == nil || tr.Stop.Metric != "unintentional_error_rate" || tr.Stop.ElapsedSecs != 1 {
		t.Fatalf("stop %+v", tr.Stop)
	}
	for i, p := range tr.Parts {
		if !strings.Contains(string(p), `"aborted":true`) {
			t.Errorf("worker %d was not aborted: %s", i, p)
		}
	}
}

// TestJoinRefusals: a taken index, an index outside the run and a full run are refused with reasons.
func TestJoinRefusals(t *testing.T) {
	t.Parallel()
	emb, err := StartEmbedded(EmbeddedConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Close()
	c, err := NewCoordinator(context.Background(), CoordinatorConfig{Conn: ConnConfig{URL: emb.URL, Token: emb.Token}, Secret: "s", Workers: 1,
		JoinTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var nre *NotReadyError
	if err := c.WaitReady(context.Background()); !errors.As(err, &nre) || len(nre.Missing) != 1 || !strings.Contains(err.Error(), "missing indexes 0") {
		t.Fatalf("WaitReady without workers: %v", err)
	}
	run := func(name string, index int) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return RunWorker(ctx, WorkerConfig{Conn: ConnConfig{URL: emb.URL, Token: emb.Token}, Secret: "s", Name: name, Index: index, JoinTimeout: 3 * time.Second,
			Exec: func(context.Context, []string, *Share) error { return nil }, Targets: func([]string) ([]string, error) { return nil, nil }})
	}
	if err := run("x", 5); err == nil || !strings.Contains(err.Error(), "outside 0..0") {
		t.Errorf("index 5: %v", err)
	}
	go run("first", 0)
	// Wait until the coordinator holds index 0 for "first" (its join is answered), by a deadline.
	for deadline := time.Now().Add(10 * time.Second); c.Workers()[0].Name != "first"; {
		if time.Now().After(deadline) {
			t.Fatal("the first worker never joined")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := run("second", 0); err == nil || !strings.Contains(err.Error(), "taken by first") {
		t.Errorf("taken index: %v", err)
	}
	if err := run("third", -1); err == nil || !strings.Contains(err.Error(), "already has its 1 workers") {
		t.Errorf("full run: %v", err)
	}
	if _, err := Connect(ConnConfig{URL: emb.URL}); err == nil {
		t.Error("the embedded server accepted a client without its token")
	}
}

// TestLinkKeysRunMergesLiveAndRecordsStarts: a LinkKeys spec reaches every worker as one task (the
// segment from the task, not the spec), the merged intervals reach the coordinator's own interval
// observer in order, and each worker's measured start goes into the manifest's task record.
func TestLinkKeysRunMergesLiveAndRecordsStarts(t *testing.T) {
	t.Parallel()
	emb, err := StartEmbedded(EmbeddedConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Close()
	var progress bytes.Buffer
	c, err := NewCoordinator(context.Background(), CoordinatorConfig{Conn: ConnConfig{URL: emb.URL, Token: emb.Token}, Secret: "s", Workers: 2,
		JoinTimeout: 20 * time.Second, StartLead: 200 * time.Millisecond, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const spec = `{"command":"ddos","segment":{"index":0,"count":0}}`
	var mu sync.Mutex
	var specs []string
	exec := func(ctx context.Context, args []string, h *Share) error {
		mu.Lock()
		specs = append(specs, strings.Join(args, " "))
		mu.Unlock()
		if d := time.Until(h.Start); d > 0 {
			time.Sleep(d)
		}
		started := time.Now()
		for k := range 2 {
			lat := hist.New()
			lat.Record(time.Millisecond)
			engine.IntervalObserver(ctx)(&result.Interval{T: float64(k), Secs: 1, Counts: map[string]int64{"success": 3, "tcp_connect_error": 1},
				Latency: map[string]*hist.Histogram{"connect_handshake": lat}})
		}
		return h.Deliver(map[string]any{"started_at": started, "segment": h.Segment})
	}
	startWorkers(t, emb.URL, emb.Token, 2, exec)
	if err := c.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	var merged []int64
	ctx := engine.WithIntervalObserver(context.Background(), func(iv *result.Interval) { merged = append(merged, iv.Total()) })
	parts, err := c.LinkKeysRun(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range parts {
		var got struct{ Segment result.Segment }
		if err := json.Unmarshal(p, &got); err != nil || got.Segment != (result.Segment{Index: i, Count: 2}) {
			t.Errorf("part %d: %v, segment %v", i, err, got.Segment)
		}
	}
	want := "linkkeys worker --spec " + spec
	if len(specs) != 2 || specs[0] != want || specs[1] != want {
		t.Errorf("tasks %q; want two of %q", specs, want)
	}
	if len(merged) != 2 || merged[0] != 8 || merged[1] != 8 {
		t.Errorf("the observer saw merged totals %v; want [8 8]", merged)
	}
	tasks := c.Tasks()
	if len(tasks) != 1 || len(tasks[0].Starts) != 2 || tasks[0].Starts[0].IsZero() || tasks[0].Starts[1].IsZero() {
		t.Fatalf("task records %+v", tasks)
	}
	if tasks[0].Describe != "linkkeys ddos" || !strings.Contains(progress.String(), "linkkeys ddos t=2s  16 ops") || strings.Contains(progress.String(), "p50=0.0ms") {
		t.Errorf("record %q, progress:\n%s", tasks[0].Describe, progress.String())
	}
}

// lkTask is a LinkKeys task's command line, run by the tests' fake Exec.
var lkTask = []string{"linkkeys", "worker", "--spec", "{}"}
