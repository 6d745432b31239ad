package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/evidence"
	"github.com/loadproof/loadproof/internal/hist"
	lkr "github.com/loadproof/loadproof/internal/linkkeysresult"
	"github.com/loadproof/loadproof/internal/result"
)

func TestDurationTextAdaptsItsUnit(t *testing.T) {
	for d, want := range map[time.Duration]string{18 * time.Microsecond: "18.0µs", 3620 * time.Microsecond: "3.62ms",
		17900 * time.Millisecond: "17.9s", 0: "0", 250 * time.Millisecond: "250ms"} {
		if got := DurationText(d); got != want {
			t.Errorf("DurationText(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestHeadlineCountsRefusalsApart: a request-bench whose server refused most requests by design
// headlines the served rate, and lists the refusals with their remedy, not as failures.
func TestHeadlineCountsRefusalsApart(t *testing.T) {
	h := hist.New()
	for range 100 {
		h.Record(2 * time.Millisecond)
	}
	r := &lkr.Result{Requests: &lkr.Requests{Completed: 691, Errors: 48000, Statuses: map[string]int64{"Unavailable": 48000}, Latency: h}}
	r.Command = lkr.CmdRequestBench
	r.Flags = map[string]string{"duration-secs": "2", "op": "domain-keys", "connections": "2"}
	var b bytes.Buffer
	LinkKeysHeadline(&b, r)
	out := b.String()
	for _, want := range []string{"headline: 346 served requests/s, latency p50 2.00ms", "refused by design: 48000 (public_read_limiter=48000)",
		"to admit more (public_read_limiter): each source address gets PUBLIC_READ_BURST"} {
		if !strings.Contains(out, want) {
			t.Errorf("headline lacks %q:\n%s", want, out)
		}
	}
	r.Finish()
	if r.Refused[lkr.RefusedPublicRead] != 48000 {
		t.Errorf("result's refused %v", r.Refused)
	}
}

// TestHandshakeHeadlineNamesFailuresBesidesRefusals: a handshake-bench whose server's limiter
// refused handshakes says, on its headline, how many handshakes failed besides those refusals (the
// refusals are not failures); a hostile refused figure larger than the failures gives 0, and a run
// without refusals says nothing of them.
func TestHandshakeHeadlineNamesFailuresBesidesRefusals(t *testing.T) {
	run := func(failed int64, causes map[string]int64) string {
		r := &lkr.Result{Handshakes: &lkr.Handshakes{Completed: 400, Failed: failed}, Attempts: lkr.NewAttempts()}
		r.Command = lkr.CmdHandshakeBench
		r.Flags = map[string]string{"duration-secs": "2"}
		r.Causes = causes
		var b bytes.Buffer
		LinkKeysHeadline(&b, r)
		return b.String()
	}
	refused := func(n int64) map[string]int64 {
		return map[string]int64{result.ClassRefused + ":" + lkr.RefusedHandshakeSource: n}
	}
	for _, c := range []struct {
		name   string
		failed int64
		causes map[string]int64
		want   string
		absent string
	}{
		{"refusals and failures", 950, refused(900), "headline: 200 completed handshakes/s; 50 failures besides the refusals\n", ""},
		{"refusals only", 900, refused(900), "; 0 failures besides the refusals\n", ""},
		{"hostile refusals", 10, refused(1 << 40), "; 0 failures besides the refusals\n", ""},
		{"no refusals", 30, nil, "headline: 200 completed handshakes/s\n", "besides the refusals"},
	} {
		out := run(c.failed, c.causes)
		if !strings.Contains(out, c.want) || c.absent != "" && strings.Contains(out, c.absent) {
			t.Errorf("%s: headline lacks %q (or has %q):\n%s", c.name, c.want, c.absent, out)
		}
	}
}

// TestPageHeadlineCountsRefusalsApart: the page's headline quotes the successes' rate and latency;
// refusals by design (a refusal class, or a harness's refused figures within its failure classes)
// are neither failures nor throughput, and a hostile refused figure cannot exceed the operations
// that did not succeed.
func TestPageHeadlineCountsRefusalsApart(t *testing.T) {
	ok, all := hist.New(), hist.New()
	for range 10 {
		ok.Record(2 * time.Millisecond)
		all.Record(50 * time.Microsecond)
	}
	hs := map[string]*hist.Histogram{"attempt": all, "connect_handshake": ok}
	totals := map[string]int64{"success": 300, lkr.ClassTLS: 9700}
	h := headlineOf(totals, hs, 2*time.Second, nil, map[string]int64{lkr.RefusedHandshakeSource: 9000})
	if h.Kind != "connect_handshake" || float64(h.P50Ms) < 1.9 {
		t.Errorf("headline latency from %q p50 %v: want the successes' connect_handshake", h.Kind, h.P50Ms)
	}
	if float64(h.Throughput) != 150 || h.Refused != 9000 || h.Failures != 700 || float64(h.OfferedRate) != 5000 {
		t.Errorf("throughput %v refused %d failures %d offered %v; want 150, 9000, 700, 5000", h.Throughput, h.Refused, h.Failures, h.OfferedRate)
	}
	if got := float64(h.SuccessRate); got < 0.29 || got > 0.31 {
		t.Errorf("success rate %v; want 300 of the 1000 not refused", got)
	}
	kc := headlineOf(map[string]int64{"success": 10, "intentional": 5, "server": 5}, nil, time.Second, nil, nil)
	if kc.Refused != 5 || kc.Failures != 5 || kc.RefusedBy["intentional"] != 5 {
		t.Errorf("keycast shedding: %+v", kc)
	}
	hostile := headlineOf(totals, hs, time.Second, nil, map[string]int64{"x": 1 << 62, "y": -5})
	if hostile.Refused != 9700 || hostile.Failures != 0 {
		t.Errorf("hostile refused: %d refused, %d failures", hostile.Refused, hostile.Failures)
	}
}

// TestServerCountersDrawnSinceTheRunStarted: a counter since the server's start (240,000
// rate-limited answers left from earlier runs) is drawn as its growth during this run; a gauge
// stays as sampled.
func TestServerCountersDrawnSinceTheRunStarted(t *testing.T) {
	var tl timeline
	running := map[string]float64{}
	ivs := []result.Interval{
		{T: 0, Secs: 1, Server: map[string]float64{"rate_limited_responses": 240000, "open_connections": 12}},
		{T: 1, Secs: 1, Server: map[string]float64{"rate_limited_responses": 240100, "open_connections": 15}},
	}
	var rows []Row
	for i := range ivs {
		rows = append(rows, tl.row(&ivs[i], 0, running))
	}
	find := func(r Row, name string) float64 {
		for k, v := range r.Server {
			if strings.HasSuffix(k, "|"+name) {
				return float64(v)
			}
		}
		t.Fatalf("no %s in %v", name, r.Server)
		return 0
	}
	if a, b := find(rows[0], "rate_limited_responses"), find(rows[1], "rate_limited_responses"); a != 0 || b != 100 {
		t.Errorf("counter drawn %v, %v; want 0, 100 (since the run's first sample)", a, b)
	}
	if g := find(rows[1], "open_connections"); g != 15 {
		t.Errorf("gauge drawn %v, want 15", g)
	}
}

func TestRehearsalIsALoopbackTarget(t *testing.T) {
	cases := []struct {
		ev   evidence.Evidence
		want bool
	}{
		{evidence.Evidence{Plan: evidence.PlanInfo{TargetURL: "http://127.0.0.1:3000"}}, true},
		{evidence.Evidence{Plan: evidence.PlanInfo{TargetURL: "https://keycast.staging.example"}}, false},
		{evidence.Evidence{Phases: []evidence.Phase{{Server: &evidence.Server{}}}}, true},
		{evidence.Evidence{Phases: []evidence.Phase{{Server: &evidence.Server{Target: "198.18.0.1:4433"}}}}, false},
		{evidence.Evidence{}, false},
	}
	for i, c := range cases {
		if got := Rehearsal(&c.ev); got != c.want {
			t.Errorf("case %d: Rehearsal = %v, want %v", i, got, c.want)
		}
	}
}
