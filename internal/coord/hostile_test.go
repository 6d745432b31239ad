package coord

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/loadproof/loadproof/internal/result"
	"github.com/loadproof/loadproof/internal/testwait"
)

// hostile is a peer on the run's NATS server: it holds the server's token (any client of a shared
// server does) but not the run secret. It records every message it can see, replays them and
// forges its own.
type hostile struct {
	t  *testing.T
	nc *nats.Conn

	mu   sync.Mutex
	seen []*nats.Msg
}

func newHostile(t *testing.T, url, token string) *hostile {
	t.Helper()
	nc, err := Connect(ConnConfig{URL: url, Token: token, Name: "hostile"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	h := &hostile{t: t, nc: nc}
	// Every message of the protocol (not ">": a silent subscriber to the JetStream API would make
	// the coordinator's probe for an object store wait out its timeout).
	if _, err := nc.Subscribe(DefaultPrefix+".>", func(m *nats.Msg) {
		c := nats.NewMsg(m.Subject)
		c.Data = append([]byte(nil), m.Data...)
		for k, v := range m.Header {
			c.Header[k] = append([]string(nil), v...)
		}
		c.Reply = m.Reply
		h.mu.Lock()
		h.seen = append(h.seen, c)
		h.mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return h
}

// captured returns copies of the messages seen whose subject ends in suffix.
func (h *hostile) captured(suffix string) []*nats.Msg {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*nats.Msg
	for _, m := range h.seen {
		if strings.HasSuffix(m.Subject, suffix) {
			out = append(out, m)
		}
	}
	return out
}

// replay republishes m unchanged (subject, headers, body) as a request, and reports whether
// anyone answered within d: a receiver that takes a replay answers it.
func (h *hostile) replay(m *nats.Msg, d time.Duration) bool {
	c := nats.NewMsg(m.Subject)
	c.Data, c.Header = m.Data, m.Header
	_, err := h.nc.RequestMsg(c, d)
	return err == nil
}

// hostileRun is a coordinator with n workers on an embedded server reached as an external one, and
// a hostile peer that was listening from the start.
func hostileRun(t *testing.T, n int, noJS bool, exec func(context.Context, []string, *Share) error, tweak ...func(*CoordinatorConfig)) (*Coordinator, *hostile, *Embedded) {
	t.Helper()
	emb, err := StartEmbedded(EmbeddedConfig{NoJetStream: noJS})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Close)
	h := newHostile(t, emb.URL, emb.Token)
	cfg := CoordinatorConfig{Conn: ConnConfig{URL: emb.URL, Token: emb.Token}, Secret: "s", Workers: n,
		JoinTimeout: 20 * time.Second, StartLead: 300 * time.Millisecond}
	for _, f := range tweak {
		f(&cfg)
	}
	c, err := NewCoordinator(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	startWorkers(t, emb.URL, emb.Token, n, exec)
	if err := c.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	return c, h, emb
}

// TestHostileReplayedResultKeepsEveryWorker (finding 2): a peer re-sends worker 0's result
// announcement while worker 1 is still running; the merged task still holds both workers' results.
// Before, the repeat's fetch failed (its chunks were gone) and overwrote the good part.
func TestHostileReplayedResultKeepsEveryWorker(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs whole coordinated tasks over NATS for seconds (-short)")
	}
	replayed := make(chan struct{})
	var h *hostile
	exec := func(ctx context.Context, args []string, hk *Share) error {
		if hk.Segment.Index == 1 {
			select {
			case <-replayed:
			case <-time.After(20 * time.Second):
			}
		}
		return hk.Deliver(map[string]any{"segment": hk.Segment, "pad": strings.Repeat("x", ChunkSize+10)})
	}
	c, hh, _ := hostileRun(t, 2, true, exec)
	h = hh
	defer c.Close()
	go func() {
		defer close(replayed)
		deadline := time.Now().Add(15 * time.Second)
		for time.Now().Before(deadline) {
			if rs := h.captured("." + c.Run() + ".result"); len(rs) > 0 {
				h.replay(rs[0], time.Second)
				h.replay(rs[0], time.Second)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	tr, err := c.RunTask(context.Background(), lkTask, TaskOptions{Describe: "t"})
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range tr.Parts {
		if p == nil {
			t.Errorf("worker %d's result was dropped: %q", i, tr.Errors[i])
		}
	}
	if tr.Stop != nil || c.Partial() != nil {
		t.Errorf("stop %+v, partial %v", tr.Stop, c.Partial())
	}
	if got := c.Refusals()[RefusedReplay]; got < 1 {
		t.Errorf("replays refused: %d (%v)", got, c.Refusals())
	}
}

// TestHostileReplaysEveryMessageType (findings 4 and 5, and the rest of the protocol): after a
// task, a peer replays every message it saw (joins, tasks, heartbeats, snapshots, chunks,
// results, pings, byes), forges an abort's headers, floods chunks and joins as a fake worker. No
// worker runs a task twice, nothing is taken, and the next task runs whole.
func TestHostileReplaysEveryMessageType(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs whole coordinated tasks over NATS for seconds (-short)")
	}
	var runs atomic.Int64
	exec := func(ctx context.Context, args []string, share *Share) error {
		runs.Add(1)
		return fakeExec(ChunkSize+10)(ctx, args, share)
	}
	c, h, emb := hostileRun(t, 2, true, exec)
	defer c.Close()
	if _, err := c.RunTask(context.Background(), lkTask, TaskOptions{Describe: "t"}); err != nil {
		t.Fatal(err)
	}
	// A replayed task is never taken: the worker answers nothing (before: it re-ran the load).
	for _, m := range h.captured(".task") {
		if h.replay(m, 500*time.Millisecond) {
			t.Errorf("a replayed task on %s was answered", m.Subject)
		}
	}
	// Every other message, replayed at once (each waits 50 ms for an answer nobody should give).
	var wg sync.WaitGroup
	for _, kind := range []string{".join", ".coord", ".snap", ".chunk", ".result", ".ping", ".cping", ".ready", ".abort"} {
		for _, m := range h.captured(kind) {
			wg.Go(func() { h.replay(m, 50*time.Millisecond) })
		}
	}
	testwait.WaitGroup(t, &wg, testwait.Long, "the replays' ends")
	// Forged steering headers on a captured chunk, and a fake worker's join without the secret.
	for _, m := range h.captured(".chunk") {
		f := nats.NewMsg(m.Subject)
		f.Data, f.Header = m.Data, nats.Header{}
		for k, v := range m.Header {
			f.Header[k] = v
		}
		f.Header.Set(hdrSeq, "0")
		f.Header.Set(hdrN, strconv.FormatUint(^uint64(0)>>1, 10))
		if h.replay(f, 200*time.Millisecond) {
			t.Error("a chunk with forged headers was answered")
		}
	}
	fake := newSigner("not-the-secret", "j:fake")
	jm, _ := fake.msg(c.subj.join(), JoinMsg{Version: ProtocolVersion, Name: "fake", Index: -1, Run: c.Run(), JoinID: "x"})
	if h.replay(jm, 300*time.Millisecond) {
		t.Error("a join without the secret was answered")
	}
	// A join captured from this run, replayed: its join ID was taken once.
	for _, m := range h.captured(".join") {
		if resp, err := h.nc.RequestMsg(&nats.Msg{Subject: m.Subject, Header: m.Header, Data: m.Data}, 300*time.Millisecond); err == nil && strings.Contains(string(resp.Data), `"accepted":true`) {
			t.Errorf("a replayed join was accepted: %s", resp.Data)
		}
	}
	if got := runs.Load(); got != 2 {
		t.Fatalf("the workers ran %d tasks; want 2 (one each)", got)
	}
	tr, err := c.RunTask(context.Background(), lkTask, TaskOptions{Describe: "t2"})
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range tr.Parts {
		if p == nil {
			t.Errorf("second task: worker %d delivered nothing: %q", i, tr.Errors[i])
		}
	}
	ref := c.Refusals()
	if ref[RefusedReplay] == 0 || ref[RefusedSignature] == 0 {
		t.Errorf("refusals %v; want replays and bad signatures counted", ref)
	}
	t.Logf("coordinator refusals: %v", ref)
	_ = emb
}

// TestHostileJoinFromEarlierRun (finding 4): a join captured in one run, replayed to the next run
// with the same secret and prefix, does not take an index: the coordinator answers with its own
// run's nonce, and the real worker joins.
func TestHostileJoinFromEarlierRun(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs whole coordinated tasks over NATS for seconds (-short)")
	}
	c1, h, emb := hostileRun(t, 1, false, fakeExec(10))
	joins := h.captured(".join")
	c1.Close()
	c2, err := NewCoordinator(context.Background(), CoordinatorConfig{Conn: ConnConfig{URL: emb.URL, Token: emb.Token}, Secret: "s", Workers: 1,
		JoinTimeout: 20 * time.Second, StartLead: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if len(joins) == 0 {
		t.Fatal("no join captured")
	}
	for _, m := range joins {
		resp, err := h.nc.RequestMsg(&nats.Msg{Subject: m.Subject, Header: m.Header, Data: m.Data}, 2*time.Second)
		if err != nil {
			t.Fatalf("no answer to a join: %v", err)
		}
		if strings.Contains(string(resp.Data), `"accepted":true`) {
			t.Fatalf("a join of the earlier run was accepted by the next: %s", resp.Data)
		}
	}
	if w := c2.Workers(); w[0].State != "missing" {
		t.Fatalf("index 0 taken by %+v", w[0])
	}
	startWorkers(t, emb.URL, emb.Token, 1, fakeExec(10))
	if err := c2.WaitReady(context.Background()); err != nil {
		t.Fatalf("the real worker could not join: %v", err)
	}
}

// TestHostileHeartbeatReplayDoesNotHoldWorker (finding 3): the coordinator dies while a peer
// replays its captured heartbeats every 400 ms; the worker still stops within 5 s.
func TestHostileHeartbeatReplayDoesNotHoldWorker(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs whole coordinated tasks over NATS for seconds (-short)")
	}
	emb, err := StartEmbedded(EmbeddedConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Close()
	h := newHostile(t, emb.URL, emb.Token)
	c, err := NewCoordinator(context.Background(), CoordinatorConfig{Conn: ConnConfig{URL: emb.URL, Token: emb.Token}, Secret: "s", Workers: 1, JoinTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		done <- RunWorker(ctx, WorkerConfig{Conn: ConnConfig{URL: emb.URL, Token: emb.Token}, Secret: "s", Name: "w", Index: 0,
			Exec: fakeExec(1), Targets: func([]string) ([]string, error) { return nil, nil }})
	}()
	if err := c.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 10*time.Second, "three captured heartbeats", func() bool { return len(h.captured("."+c.Run()+".coord")) >= 3 })
	beats := h.captured("." + c.Run() + ".coord")
	// The coordinator dies: no goodbye, no more heartbeats, its connection gone.
	close(c.stopHB)
	c.nc.Close()
	died := time.Now()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tk := time.NewTicker(400 * time.Millisecond)
		defer tk.Stop()
		for {
			for _, m := range beats {
				_ = h.nc.PublishMsg(&nats.Msg{Subject: m.Subject, Header: m.Header, Data: m.Data})
			}
			select {
			case <-stop:
				return
			case <-tk.C:
			}
		}
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrCoordinatorLost) {
			t.Fatalf("worker ended with %v; want ErrCoordinatorLost", err)
		}
		if el := time.Since(died); el > 5*time.Second {
			t.Fatalf("the worker stopped %s after the coordinator died", el)
		}
	case <-time.After(8 * time.Second):
		t.Fatal("the worker was still running 8 s after its coordinator died, held by replayed heartbeats")
	}
}

// TestHostileChunkFloodBoundsMemory (finding 5): 400 chunks announcing far-off sequence numbers for
// tasks that do not exist, unsigned and signed by a party with the secret, leave the coordinator's
// heap under 200 MiB (before, it grew past 1 GiB).
func TestHostileChunkFloodBoundsMemory(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs whole coordinated tasks over NATS for seconds (-short)")
	}
	c, h, _ := hostileRun(t, 1, true, fakeExec(10))
	defer c.Close()
	insider := newSigner("s", "w0")
	insider.bind(c.Run(), "")
	subj := c.subj.sub("chunk")
	for k := range 400 {
		hdr := map[string]string{hdrIndex: "0", hdrTask: strconv.Itoa(1000 + k), hdrSeq: "65535", hdrOf: "65536"}
		plain := nats.NewMsg(subj)
		plain.Data = []byte("x")
		for name, v := range hdr {
			plain.Header.Set(name, v)
		}
		_ = h.nc.PublishMsg(plain)
		_ = h.nc.PublishMsg(insider.raw(subj, []byte("x"), hdr))
	}
	// The coordinator handles a subject's messages in order: the answer to a last signed chunk
	// means the flood was handled.
	resp, err := h.nc.RequestMsg(insider.raw(subj, []byte("x"), map[string]string{hdrIndex: "0", hdrTask: "1", hdrSeq: "0", hdrOf: "1"}), 10*time.Second)
	if err != nil {
		t.Fatalf("no answer after the flood: %v", err)
	}
	if strings.Contains(string(resp.Data), `"accepted":true`) {
		t.Errorf("a chunk for no running task was accepted")
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if ms.HeapAlloc > 200<<20 {
		t.Fatalf("heap %d MiB after the chunk flood; want under 200 MiB", ms.HeapAlloc>>20)
	}
	if got := c.Refusals(); got[RefusedChunk] < 400 || got[RefusedSignature] < 400 {
		t.Errorf("refusals %v; want 400 chunks refused and 400 bad signatures", got)
	}
	t.Logf("heap %d MiB after the flood; refusals %v", ms.HeapAlloc>>20, c.Refusals())
}

// TestPartialMergeIsMarked: a worker that delivers no result makes the task partial: a stop
// reason on the task and Partial set, so the run cannot exit 0.
func TestPartialMergeIsMarked(t *testing.T) {
	t.Parallel()
	exec := func(ctx context.Context, args []string, hk *Share) error {
		if hk.Segment.Index == 1 {
			return errors.New("boom")
		}
		return hk.Deliver(map[string]any{"ok": true})
	}
	c, _, _ := hostileRun(t, 2, false, exec)
	defer c.Close()
	tr, err := c.RunTask(context.Background(), lkTask, TaskOptions{Describe: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Parts[0] == nil || tr.Parts[1] != nil || tr.Stop == nil || tr.Stop.Reason != "worker-lost" || c.Partial() == nil {
		t.Fatalf("parts %v, stop %+v, partial %v", tr.Parts[1] != nil, tr.Stop, c.Partial())
	}
}

// TestFailClosedWithoutSecret (finding 6): on a NATS it does not embed, a coordinator or worker
// without a secret refuses to start unless told InsecureUnsigned.
func TestFailClosedWithoutSecret(t *testing.T) {
	t.Parallel()
	emb, err := StartEmbedded(EmbeddedConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Close()
	conn := ConnConfig{URL: emb.URL, Token: emb.Token}
	if _, err := NewCoordinator(context.Background(), CoordinatorConfig{Conn: conn, Workers: 1}); err == nil || !strings.Contains(err.Error(), "--insecure-unsigned") {
		t.Errorf("coordinator without a secret: %v", err)
	}
	err = RunWorker(context.Background(), WorkerConfig{Conn: conn, Exec: fakeExec(1), Targets: func([]string) ([]string, error) { return nil, nil }})
	if err == nil || !strings.Contains(err.Error(), "--insecure-unsigned") {
		t.Errorf("worker without a secret: %v", err)
	}
	c, err := NewCoordinator(context.Background(), CoordinatorConfig{Conn: conn, Workers: 1, InsecureUnsigned: true})
	if err != nil {
		t.Fatalf("coordinator with InsecureUnsigned: %v", err)
	}
	c.Close()
}

// TestObjectStoreDeletedAtClose (finding 8): the run's object store is gone once the coordinator
// closes.
func TestObjectStoreDeletedAtClose(t *testing.T) {
	t.Parallel()
	c, h, _ := hostileRun(t, 1, false, fakeExec(10))
	if c.Transport() != "object-store" {
		t.Fatalf("transport %s", c.Transport())
	}
	if _, err := c.RunTask(context.Background(), lkTask, TaskOptions{Describe: "t"}); err != nil {
		t.Fatal(err)
	}
	bucket := c.bucket
	c.Close()
	js, err := jetstream.New(h.nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := js.ObjectStore(ctx, bucket); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Fatalf("the run's object store %s after Close: %v", bucket, err)
	}
}

// TestEmbeddedPerRunUsers: on the coordinator's own embedded server the workers' token is a user
// with the run's subject permissions (NATS's own): results travel through the object store under
// them, and a client holding that token cannot send a worker a task, read the results subject or
// touch another bucket.
func TestEmbeddedPerRunUsers(t *testing.T) {
	t.Parallel()
	c, err := NewCoordinator(context.Background(), CoordinatorConfig{Secret: "s", Workers: 1, JoinTimeout: 20 * time.Second, StartLead: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	startWorkers(t, c.URL(), c.Token(), 1, fakeExec(ChunkSize+10))
	if err := c.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	tr, err := c.RunTask(context.Background(), lkTask, TaskOptions{Describe: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Parts[0] == nil || c.Transport() != "object-store" {
		t.Fatalf("result %q over %s", tr.Errors[0], c.Transport())
	}
	violations := make(chan error, 8)
	nc, err := Connect(ConnConfig{URL: c.URL(), Token: c.Token()}, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { violations <- err }))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// The worker's object store upload itself passes the permissions (not a fallback to chunks).
	w := &worker{nc: nc, bucket: c.bucket, index: 0}
	if err := w.putObject(&ResultMsg{Task: 99}, []byte("x")); err != nil {
		t.Fatalf("object store upload with the worker token: %v", err)
	}
	for _, try := range []func() error{
		func() error { return nc.Publish(c.subj.worker(0, "task"), []byte("{}")) },
		func() error { _, err := nc.SubscribeSync(c.subj.sub("result")); return err },
		func() error { return nc.Publish("$JS.API.STREAM.DELETE.OBJ_"+c.bucket, nil) },
	} {
		if err := try(); err != nil {
			continue
		}
		_ = nc.Flush()
		select {
		case err := <-violations:
			if !strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
				t.Errorf("error %v; want a permissions violation", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("the server allowed a worker-token client outside the run's worker subjects")
		}
	}
	if _, err := Connect(ConnConfig{URL: c.URL(), Token: "wrong"}); err == nil {
		t.Error("the embedded server accepted a wrong token")
	}
}

// TestWorkerTakesOnlyNewerFutureTasks: even a correctly sealed task is refused when its start has
// passed or its id is not above the last task the worker took.
func TestWorkerTakesOnlyNewerFutureTasks(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs whole coordinated tasks over NATS for seconds (-short)")
	}
	c, h, _ := hostileRun(t, 1, false, fakeExec(10))
	defer c.Close()
	forger := newSigner("s", "c")
	forger.bind(c.Run(), "c")
	send := func(id int, start time.Time) bool {
		m, err := forger.msg(c.subj.worker(0, "task"), Task{ID: id, Args: lkTask, Segment: result.Segment{Index: 0, Count: 1}, StartAt: start})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := h.nc.RequestMsg(m, 500*time.Millisecond)
		return err == nil && strings.Contains(string(resp.Data), `"accepted":true`)
	}
	if send(7, time.Now().Add(-time.Second)) {
		t.Error("a task whose start has passed was taken")
	}
	if !send(7, time.Now().Add(time.Second)) {
		t.Fatal("a fresh task was not taken")
	}
	if send(6, time.Now().Add(time.Second)) {
		t.Error("a task older than the last was taken")
	}
}

// TestChunksHeldAreCapped: a party with the secret that floods well-formed chunks for the running
// task, as both workers, gets at most MaxResultBytes held; the rest is refused, and the chunks
// are dropped when the task ends. (A holder of the secret can also speak as a worker with higher
// sequence numbers, so the real workers' messages are then refused: the task is interrupted.)
func TestChunksHeldAreCapped(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs whole coordinated tasks over NATS for seconds (-short)")
	}
	hold := make(chan struct{})
	exec := func(ctx context.Context, args []string, hk *Share) error {
		select {
		case <-hold:
		case <-ctx.Done():
		}
		return hk.Deliver(map[string]int{"i": hk.Segment.Index})
	}
	c, h, _ := hostileRun(t, 2, true, exec, func(cfg *CoordinatorConfig) { cfg.ResultWait = time.Second })
	defer c.Close()
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		_, err := c.RunTask(ctx, lkTask, TaskOptions{Describe: "t"})
		done <- err
	}()
	testwait.Eventually(t, 10*time.Second, "the task's start", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.cur != nil && c.cur.startAt.Before(time.Now())
	})
	part := make([]byte, ChunkSize)
	of := MaxResultBytes / ChunkSize
	accepted := 0
	for w := range 2 {
		insider := newSigner("s", workerFrom(w))
		insider.bind(c.Run(), "")
		for seq := range of {
			hdr := map[string]string{hdrIndex: strconv.Itoa(w), hdrTask: "1", hdrSeq: strconv.Itoa(seq), hdrOf: strconv.Itoa(of)}
			resp, err := h.nc.RequestMsg(insider.raw(c.subj.sub("chunk"), part, hdr), 10*time.Second)
			if err != nil {
				t.Fatalf("chunk %d of worker %d: %v", seq, w, err)
			}
			if strings.Contains(string(resp.Data), `"accepted":true`) {
				accepted++
			}
		}
	}
	c.mu.Lock()
	held := c.chunkBytes
	c.mu.Unlock()
	if held > MaxResultBytes || accepted != of {
		t.Errorf("%d bytes held, %d chunks accepted; want at most %d bytes, %d chunks", held, accepted, MaxResultBytes, of)
	}
	close(hold)
	cancel()
	if err := testwait.Recv(t, done, testwait.Long, "the task's end"); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.chunkBytes != 0 || len(c.chunks) != 0 {
		t.Errorf("%d bytes in %d chunk sets left after the task", c.chunkBytes, len(c.chunks))
	}
}
