package coord

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/hostrule"
	"github.com/loadproof/loadproof/internal/result"
)

func TestWireIntervalMergesExactly(t *testing.T) {
	a, b := hist.New(), hist.New()
	for i := range 3000 {
		a.Record(time.Duration(i*7%50000+1) * time.Microsecond)
		b.Record(time.Duration(i*13%900000+1) * time.Microsecond)
	}
	ivA := &result.Interval{T: 1, Secs: 1, Counts: map[string]int64{"success": 2990, "network": 10}, Latency: map[string]*hist.Histogram{"latency": a}}
	ivB := &result.Interval{T: 1, Secs: 1, Counts: map[string]int64{"success": 3000}, Causes: map[string]int64{"x": 1}, Latency: map[string]*hist.Histogram{"latency": b}}
	var direct, wire result.Interval
	direct.Add(ivA)
	direct.Add(ivB)
	ToWire(ivA).AddTo(&wire)
	ToWire(ivB).AddTo(&wire)
	if wire.Total() != direct.Total() || wire.Causes["x"] != 1 || wire.Latency["latency"].Summary() != direct.Latency["latency"].Summary() {
		t.Fatalf("wire merge %+v differs from direct merge %+v", wire.Latency["latency"].Summary(), direct.Latency["latency"].Summary())
	}
	if got := unpackBuckets([]byte{0x80}); got != nil {
		t.Errorf("a truncated varint decoded to %v", got)
	}
}

// TestSignerRejectsForgeryAndReplay: a forged body, a forged steering header, an unsigned message,
// a repeat, another run's message and a stale one are refused and counted; reordered messages
// within the window are taken.
func TestSignerRejectsForgeryAndReplay(t *testing.T) {
	send := newSigner("k", "w0")
	send.bind("run1", "")
	recv := newSigner("k", "c")
	recv.bind("run1", "c")
	m, err := send.msg("lp.r.abort", Abort{Task: -1, Reason: "x"})
	if err != nil {
		t.Fatal(err)
	}
	var a Abort
	if err := recv.open(m, &a); err != nil || a.Reason != "x" {
		t.Fatalf("open: %v %+v", err, a)
	}
	if err := recv.open(m, &a); err != errReplay {
		t.Errorf("replayed message: %v", err)
	}
	forged := send.raw("lp.r.chunk", []byte("x"), map[string]string{hdrSeq: "1"})
	forged.Header.Set(hdrSeq, "9999")
	if err := recv.check(forged); err != errBadSignature {
		t.Errorf("forged header accepted: %v", err)
	}
	body, _ := send.msg("lp.r.abort", Abort{Task: -1, Reason: "x"})
	body.Data = []byte(`{"task":-1,"reason":"forged"}`)
	if err := recv.open(body, &a); err != errBadSignature {
		t.Errorf("forged body accepted: %v", err)
	}
	plain := nats.NewMsg("lp.r.abort")
	plain.Data = []byte(`{}`)
	if err := recv.check(plain); err != errBadSignature {
		t.Errorf("unsigned message accepted: %v", err)
	}
	other := newSigner("k", "w0")
	other.bind("run0", "")
	old, _ := other.msg("lp.r.abort", Abort{})
	if err := recv.check(old); err != errWrongRun {
		t.Errorf("another run's message: %v", err)
	}
	stale := send.raw("lp.r.abort", []byte("{}"), map[string]string{hdrT: "1"})
	if err := recv.check(stale); err != errStale {
		t.Errorf("stale message: %v", err)
	}
	a1, _ := send.msg("s", 1)
	a2, _ := send.msg("s", 2)
	if recv.check(a2) != nil || recv.check(a1) != nil {
		t.Errorf("reordered messages refused")
	}
	got := recv.refusals()
	if got[RefusedReplay] != 1 || got[RefusedSignature] != 3 || got[RefusedWrongRun] != 1 || got[RefusedStale] != 1 {
		t.Errorf("refusals %v", got)
	}
	if err := newSigner("", "c").check(plain); err == nil {
		t.Errorf("no secret: a message without sequence or time was taken")
	}
}

func TestSeqWindow(t *testing.T) {
	var w seqWindow
	for _, c := range []struct {
		n  uint64
		ok bool
	}{{0, false}, {5, true}, {5, false}, {3, true}, {3, false}, {5 + replayWindow, true}, {5, false}, {6, true}, {6 + 2*replayWindow, true}, {6 + replayWindow, false}, {7 + replayWindow, true}} {
		if got := w.accept(c.n); got != c.ok {
			t.Errorf("accept(%d) = %v; want %v", c.n, got, c.ok)
		}
	}
}

func TestHostRules(t *testing.T) {
	r := hostrule.Rules{AllowHost: "keycast.staging.test"}
	for url, ok := range map[string]bool{
		"http://127.0.0.1:3000": true, "http://localhost:1": true, "http://[::1]:2": true,
		"https://keycast.staging.test": true, "https://other.test": false,
		"https://keycast.divine.video": false, "https://login.divine.video.": false, "not a url": false,
	} {
		if err := r.AuthorizeURL(url); (err == nil) != ok {
			t.Errorf("AuthorizeURL(%q) = %v; want ok %v", url, err, ok)
		}
	}
	if err := CheckCommand([]string{"linkkeys", "worker", "--spec", "{}"}); err != nil {
		t.Error(err)
	}
	for _, args := range [][]string{{"keycast", "server"}, {"sh", "-c", "true"}, {"linkkeys", "worker", "--", "x"}, {"keycast", "run"}, {}} {
		if CheckCommand(args) == nil {
			t.Errorf("CheckCommand(%q) allowed", args)
		}
	}
}

// TestTaskFlagAllowList (finding 7): a LinkKeys task carries only its spec; an output path or an
// unknown flag is refused, and a `keycast run` command line is no task at all (Keycast tasks are
// typed specs).
func TestTaskFlagAllowList(t *testing.T) {
	for _, c := range []struct {
		args []string
		bad  string
	}{
		{args: []string{"linkkeys", "worker", "--spec", "{}"}},
		{args: []string{"linkkeys", "worker", "--spec"}, bad: "needs a value"},
		{args: []string{"linkkeys", "worker", "--spec", "{}", "--json", "/tmp/x"}, bad: "--json"},
		{args: []string{"linkkeys", "worker", "--spec={}"}, bad: "--spec={}"},
		{args: []string{"linkkeys", "worker", "--spec", "{}", "--spec", "{}"}, bad: "given twice"},
		{args: []string{"linkkeys", "worker"}, bad: "needs --spec"},
		{args: []string{"keycast", "run", "--dashboard", "0.0.0.0:1"}, bad: "typed spec"},
		{args: []string{"keycast", "server"}, bad: "not a client command"},
	} {
		err := CheckTaskFlags(c.args)
		if c.bad != "" {
			if err == nil || !strings.Contains(err.Error(), c.bad) {
				t.Errorf("%q: %v; want a refusal naming %s", c.args, err, c.bad)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.args, err)
		}
	}
}

func TestWorkerTaskFiles(t *testing.T) {
	dir := t.TempDir()
	w := &worker{cfg: WorkerConfig{TaskFiles: []string{dir}}}
	for _, c := range []struct {
		f  string
		ok bool
	}{{dir + "/u.json", true}, {"/etc/shadow", false}, {dir + "/../x", false}, {"u.json", false}} {
		if err := w.fileAllowed(c.f); (err == nil) != c.ok {
			t.Errorf("%s: %v", c.f, err)
		}
	}
	if err := (&worker{}).fileAllowed(dir + "/u.json"); err == nil {
		t.Error("a worker without --task-files took a task file")
	}
}

// TestWorkerAuthorizesEveryReach (finding 1): TCP targets go through AuthorizeAddr, metrics URLs
// through AuthorizeURL, and a METRICS log file only on a worker that allows one.
func TestWorkerAuthorizesEveryReach(t *testing.T) {
	w := &worker{cfg: WorkerConfig{Hosts: hostrule.Rules{AllowHost: "198.18.0.9"}}}
	for _, c := range []struct {
		target string
		ok     bool
	}{
		{"tcp://127.0.0.9:443", true}, {"tcp://198.18.0.9:443", true}, {"tcp://198.18.0.10:443", false},
		{"http://198.18.0.9/metrics", true}, {"http://169.254.169.254/latest", false},
		{"/tmp/server.log", false}, {"ftp://x", false},
	} {
		if err := w.authorize(c.target); (err == nil) != c.ok {
			t.Errorf("%s: %v", c.target, err)
		}
	}
	w.cfg.MetricsFiles = true
	if err := w.authorize("/tmp/server.log"); err != nil {
		t.Errorf("metrics file with MetricsFiles: %v", err)
	}
}

// FuzzSignerCheck feeds arbitrary envelope headers and bodies to a receiver: it never panics and
// takes nothing unsigned.
func FuzzSignerCheck(f *testing.F) {
	f.Add("lp.r.snap", "r", "w0", "123", "1700000000000000000", "sig", []byte(`{"index":0}`))
	f.Add("lp.r.chunk", "", "", "x", "-1", "", []byte{})
	f.Fuzz(func(t *testing.T, subj, run, from, n, ts, sig string, body []byte) {
		recv := newSigner("k", "c")
		recv.bind("r", "c")
		m := nats.NewMsg(subj)
		m.Data = body
		m.Header.Set(hdrRun, run)
		m.Header.Set(hdrFrom, from)
		m.Header.Set(hdrN, n)
		m.Header.Set(hdrT, ts)
		m.Header.Set(sigHeader, sig)
		if recv.check(m) == nil {
			t.Fatalf("an unsigned message was taken: %v", m.Header)
		}
	})
}

// FuzzCheckTaskFlags: any argument list is refused or is `linkkeys worker --spec JSON`.
func FuzzCheckTaskFlags(f *testing.F) {
	f.Add("keycast run --url http://127.0.0.1:1 --users-file /x")
	f.Add("linkkeys worker --spec {} --json /x")
	f.Add("linkkeys worker --spec {}")
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Fields(line)
		if CheckTaskFlags(args) != nil {
			return
		}
		if _, ok := linkKeysSpecArg(args); !ok {
			t.Fatalf("took %q; want exactly `linkkeys worker --spec JSON`", args)
		}
	})
}
