package coord

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/hostrule"
	"github.com/loadproof/loadproof/internal/keycastload"
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
	if err := CheckCommand([]string{"keycast", "run", "--url", "x"}); err != nil {
		t.Error(err)
	}
	for _, args := range [][]string{{"keycast", "server"}, {"sh", "-c", "true"}, {"keycast", "run", "--", "x"}, {}} {
		if CheckCommand(args) == nil {
			t.Errorf("CheckCommand(%q) allowed", args)
		}
	}
}

// TestKeycastArgsCarryTLS: a worker's `keycast run` verifies the target's certificate as the
// coordinator's command was told to.
func TestKeycastArgsCarryTLS(t *testing.T) {
	has := func(args []string, want ...string) bool {
		for i := range args {
			if i+len(want) <= len(args) && slices.Equal(args[i:i+len(want)], want) {
				return true
			}
		}
		return false
	}
	base := keycastload.RunConfig{URL: "https://127.0.0.1:8443", Concurrency: 4, Requests: 10}
	if a := KeycastArgs(base); has(a, "--ca-cert") || has(a, "--insecure-skip-verify") {
		t.Errorf("no TLS options, yet %v", a)
	}
	ca := base
	ca.TLS.CACertFile = "/etc/ssl/private-ca.pem"
	if a := KeycastArgs(ca); !has(a, "--ca-cert", "/etc/ssl/private-ca.pem") {
		t.Errorf("--ca-cert missing from %v", a)
	}
	skip := base
	skip.TLS.InsecureSkipVerify = true
	if a := KeycastArgs(skip); !has(a, "--insecure-skip-verify") {
		t.Errorf("--insecure-skip-verify missing from %v", a)
	}
}

// TestTaskFlagAllowList (finding 7): a task carries only the run's own load settings; a
// dashboard, an output path or an unknown flag is refused, and the files named are returned for
// the worker's file rule.
func TestTaskFlagAllowList(t *testing.T) {
	for _, c := range []struct {
		args  []string
		files []string
		bad   string
	}{
		{args: []string{"keycast", "run", "--url", "http://127.0.0.1:1", "--users-file", "/runs/u.json", "--insecure-skip-verify"}, files: []string{"/runs/u.json"}},
		{args: []string{"linkkeys", "worker", "--spec", "{}"}},
		{args: []string{"keycast", "run", "--dashboard", "0.0.0.0:1"}, bad: "--dashboard"},
		{args: []string{"keycast", "run", "--output", "/x/a/b/c.json"}, bad: "--output"},
		{args: []string{"keycast", "run", "-o", "/x"}, bad: "-o"},
		{args: []string{"keycast", "run", "--url=http://x"}, bad: "--url=http://x"},
		{args: []string{"keycast", "run", "--url"}, bad: "needs a value"},
		{args: []string{"linkkeys", "worker", "--spec", "{}", "--json", "/tmp/x"}, bad: "--json"},
		{args: []string{"keycast", "server"}, bad: "not a client command"},
	} {
		files, err := CheckTaskFlags(c.args)
		if c.bad != "" {
			if err == nil || !strings.Contains(err.Error(), c.bad) {
				t.Errorf("%q: %v; want a refusal naming %s", c.args, err, c.bad)
			}
			continue
		}
		if err != nil || !slices.Equal(files, c.files) {
			t.Errorf("%q: files %q, %v", c.args, files, err)
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

// FuzzCheckTaskFlags: any argument list is refused or yields only files named by file flags.
func FuzzCheckTaskFlags(f *testing.F) {
	f.Add("keycast run --url http://127.0.0.1:1 --users-file /x")
	f.Add("linkkeys worker --spec {} --json /x")
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Fields(line)
		files, err := CheckTaskFlags(args)
		if err != nil {
			return
		}
		for _, fl := range files {
			named := false
			for i := 1; i < len(args); i++ {
				named = named || (args[i] == fl && taskFileFlags[args[i-1]])
			}
			if !named {
				t.Fatalf("file %q not named by a file flag in %q", fl, args)
			}
		}
	})
}
