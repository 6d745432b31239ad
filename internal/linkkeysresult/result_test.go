package linkkeysresult

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/linkkeys"
	"github.com/loadproof/loadproof/internal/machine"
	"github.com/loadproof/loadproof/internal/result"
)

// randomParts records n random outcomes into a Result of each section, envelope included (totals,
// causes, histograms, intervals), deterministically from seed: whole as one process would have
// recorded them, split as parts processes would have.
func randomParts(seed uint64, parts int, n int) (whole Result, split []Result) {
	rng := rand.New(rand.NewPCG(seed, 1))
	t0 := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	mk := func(i int) Result {
		r := Result{Attempts: NewAttempts(),
			Hold:       &Hold{HoldSecs: 20},
			Handshakes: &Handshakes{DurationSecs: 10, ResumedLatency: hist.New()},
			Requests:   &Requests{DurationSecs: 10, Statuses: map[string]int64{}, Latency: hist.New(), Uncorrected: hist.New()}}
		r.Command, r.Target, r.IntervalSecs, r.Classes = CmdRequestBench, "127.0.0.1:4000", 1, AttemptClasses
		r.StartedAt, r.EndedAt = t0.Add(time.Duration(i)*time.Millisecond), t0.Add(time.Minute+time.Duration(i)*time.Second)
		r.Segments = []result.Segment{{Index: i, Count: parts}}
		r.Machines = []machine.Record{{Hostname: fmt.Sprintf("process-%d", i), OS: "linux"}}
		r.Envelope.Totals = map[string]int64{}
		r.Histograms = map[string]*hist.Histogram{KindConnectHandshake: hist.New()}
		r.Finish()
		return r
	}
	whole = mk(0)
	whole.Segments, whole.Machines = nil, nil
	for i := range parts {
		split = append(split, mk(i))
	}
	classes := []string{"", "", "", ClassConnect, ClassTLS, ClassTimeout}
	for k := range n {
		p := &split[k%parts]
		class := classes[rng.IntN(len(classes))]
		d := time.Duration(rng.ExpFloat64() * float64(3*time.Millisecond))
		iv := rng.IntN(5)
		for _, r := range []*Result{&whole, p} {
			r.Attempts.Add(class, class+":X", d)
			c := class
			if c == "" {
				c = result.ClassSuccess
				r.Histograms[KindConnectHandshake].Record(d)
			} else {
				r.Causes = addOne(r.Causes, class+":X")
			}
			r.Envelope.Totals[c]++
			for len(r.Intervals) <= iv {
				r.Intervals = append(r.Intervals, result.Interval{T: float64(len(r.Intervals)), Secs: 1})
			}
			r.Intervals[iv].Counts = addOne(r.Intervals[iv].Counts, c)
			if r.Intervals[iv].Latency == nil {
				r.Intervals[iv].Latency = map[string]*hist.Histogram{KindAttempt: hist.New()}
			}
			r.Intervals[iv].Latency[KindAttempt].Record(d)
			r.Hold.Held++
			r.Hold.StillOpen++
			r.Hold.RSSHeld += 5000
			r.Handshakes.Completed++
			r.Handshakes.Resumed += int64(k % 2)
			r.Handshakes.Full += int64(1 - k%2)
			r.Handshakes.ResumedLatency.Record(d)
			r.Requests.Completed++
			r.Requests.Sent++
			r.Requests.Statuses[linkkeys.Status(k%3).String()]++
			r.Requests.Latency.Record(d)
			r.Requests.Uncorrected.Record(d / 2)
		}
	}
	whole.StartedAt, whole.EndedAt = split[0].StartedAt, split[parts-1].EndedAt
	for i := range parts {
		whole.Segments = append(whole.Segments, result.Segment{Index: i, Count: parts})
		whole.Machines = append(whole.Machines, split[i].Machines...)
	}
	whole.Finish()
	return whole, split
}

func addOne(m map[string]int64, k string) map[string]int64 {
	if m == nil {
		m = map[string]int64{}
	}
	m[k]++
	return m
}

func TestMergeIsExact(t *testing.T) {
	for _, parts := range []int{1, 2, 3, 11} {
		whole, split := randomParts(uint64(parts), parts, 20000)
		// Merge in reverse order: the result must not depend on the order of the parts.
		rev := make([]Result, len(split))
		for i := range split {
			rev[i] = split[len(split)-1-i]
		}
		got, err := Merge(rev)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := json.Marshal(got)
		b, _ := json.Marshal(whole)
		if !bytes.Equal(a, b) {
			t.Fatalf("%d parts: merged result differs from the whole:\n%s\n%s", parts, a, b)
		}
	}
}

func TestMergeLeavesPartsAlone(t *testing.T) {
	_, split := randomParts(7, 2, 100)
	before, _ := json.Marshal(split)
	if _, err := Merge(split); err != nil {
		t.Fatal(err)
	}
	after, _ := json.Marshal(split)
	if !bytes.Equal(before, after) {
		t.Fatal("Merge modified its input")
	}
}

func TestMergeRejects(t *testing.T) {
	if _, err := Merge(nil); err == nil {
		t.Fatal("empty merge accepted")
	}
	var a, b Result
	a.Command, b.Command = CmdDDoS, CmdConnections
	if _, err := Merge([]Result{a, b}); err == nil {
		t.Fatal("mixed commands accepted")
	}
}

func TestAttemptsOfTheEnvelope(t *testing.T) {
	whole, _ := randomParts(9, 1, 3000)
	got := AttemptsOf(&whole.Envelope)
	a := whole.Attempts
	if got.Attempted != a.Attempted || got.Succeeded != a.Succeeded || got.Failed != a.Failed ||
		!reflect.DeepEqual(got.Classes, a.Classes) || !reflect.DeepEqual(got.Reasons, a.Reasons) || got.Latency.Count() != a.Latency.Count() {
		t.Fatalf("attempts from the envelope %+v, recorded %+v", got, a)
	}
}

func TestResultJSONRoundTrip(t *testing.T) {
	whole, _ := randomParts(3, 1, 500)
	whole.Flags = map[string]string{"count": "500"}
	rss := uint64(1 << 20)
	whole.Server = &ServerAccounting{Source: "x", Before: linkkeys.MetricsLine{Label: "running"},
		After: linkkeys.MetricsLine{Label: "final", AcceptedConnections: 500, ProcessRSSBytes: &rss}, Checks: []Check{{Name: "c", Client: 1, Server: 1, OK: true}}}
	b1, err := json.Marshal(whole)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Read(b1)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := json.Marshal(back)
	if !bytes.Equal(b1, b2) {
		t.Fatalf("round trip differs:\n%s\n%s", b1, b2)
	}
	if !reflect.DeepEqual(back.Attempts.Reasons, whole.Attempts.Reasons) || back.Requests.Latency.Count() != 500 || len(back.Intervals) != len(whole.Intervals) {
		t.Fatal("round trip lost data")
	}
	for _, bad := range []string{`{}`, `{"format":"other","harness":"linkkeys","command":"ddos"}`,
		`{"format":"` + result.Format + `","harness":"linkkeys","command":"nope"}`,
		`{"format":"` + result.Format + `","harness":"keycast","command":"ddos"}`, `not json`} {
		if _, err := Read([]byte(bad)); err == nil {
			t.Errorf("Read accepted %s", bad)
		}
	}
	if _, err := Read([]byte(`{"format":"loadproof.linkkeys.result/v1","command":"ddos"}`)); err == nil || !strings.Contains(err.Error(), "older loadproof") {
		t.Errorf("a v1 file: %v", err)
	}
}

func TestParamsFromFlags(t *testing.T) {
	p := ParamsFromFlags(map[string]string{"count": "200000", "concurrency": "3000", "hold-secs": "20", "client-ip-count": "64",
		"client-ip-base": "127.0.1.0", "rate": "50000", "pipeline": "8", "resume": "true", "op": "hello"})
	want := Params{Count: 200000, Concurrency: 3000, HoldSecs: 20, ClientIPCount: 64, ClientIPBase: "127.0.1.0", Rate: 50000, Pipeline: 8, Resume: true, Op: "hello"}
	if p != want {
		t.Fatalf("%+v", p)
	}
}

// connectionsTimeline is a connections result's timeline at 100 ms with the held gauge and the
// close counters.
var connectionsTimeline = []byte(`{"format":"` + result.Format + `","harness":"linkkeys","command":"connections","interval_secs":0.1,"totals":{"success":2},` +
	`"intervals":[{"t":0,"secs":0.1,"counts":{"success":2},"gauges":{"held":2}},{"t":0.1,"secs":0.1,"gauges":{"held":1},"counters":{"closed_by_server":1}},` +
	`{"t":0.2,"secs":0.05,"gauges":{"held":0},"counters":{"closed_by_client":1}}]}`)

func TestReadKeepsTheTimeline(t *testing.T) {
	r, err := Read(connectionsTimeline)
	if err != nil {
		t.Fatal(err)
	}
	if r.IntervalSecs != 0.1 || len(r.Intervals) != 3 || r.Intervals[0].Gauges[GaugeHeld] != 2 || r.Intervals[1].Counters[CounterClosedByServer] != 1 {
		t.Fatalf("%g s, %+v", r.IntervalSecs, r.Intervals)
	}
	// Two segments of it merge: the gauges add at the same instants, the counters add.
	m, err := Merge([]Result{r, r})
	if err != nil {
		t.Fatal(err)
	}
	if m.Intervals[0].Gauges[GaugeHeld] != 4 || m.Intervals[2].Gauges[GaugeHeld] != 0 || m.Intervals[2].Counters[CounterClosedByClient] != 2 {
		t.Fatalf("merged %+v", m.Intervals)
	}
	bad := bytes.Replace(connectionsTimeline, []byte(`"held":1`), []byte(`"held":-1`), 1)
	if _, err := Read(bad); err == nil || !strings.Contains(err.Error(), `gauges["held"] is negative`) {
		t.Fatalf("a negative gauge read: %v", err)
	}
}

func FuzzRead(f *testing.F) {
	whole, _ := randomParts(5, 1, 20)
	b, _ := json.Marshal(whole)
	f.Add(b)
	f.Add([]byte(`{"format":"` + result.Format + `","harness":"linkkeys","command":"ddos","attempts":{"connect_handshake_latency":{"hdr":"x"}}}`))
	f.Add([]byte(`{"format":"` + result.Format + `","harness":"linkkeys","command":"ddos","histograms":{"x":null},"intervals":[{"t":0,"latency":{"y":null}}]}`))
	f.Add([]byte(`{}`))
	f.Add(connectionsTimeline)
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Read(b)
		if err != nil {
			return
		}
		// Whatever reads merges with itself and writes back out.
		if _, err := Merge([]Result{r, r}); err != nil {
			t.Fatal(err)
		}
		if _, err := json.Marshal(r); err != nil {
			t.Fatal(err)
		}
	})
}

// TestMergeHoldLoss: the workers' losses add up; the first and last are the earliest and latest
// seen; the parts are left alone.
func TestMergeHoldLoss(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	connections := func(h *Hold) Result {
		r := Result{Hold: h}
		r.Command = CmdConnections
		return r
	}
	part := func(lost int64, first, last time.Duration, reasons map[string]int64) Result {
		return connections(&Hold{HoldSecs: 20, Held: 10, StillOpen: 10 - lost, Start: t0.Add(first - time.Second),
			Lasted: Duration(time.Second), Loss: &HoldLoss{Lost: lost, Reasons: reasons, First: t0.Add(first), Last: t0.Add(last)}})
	}
	a := part(4, 3*time.Second, 4*time.Second, map[string]int64{LossClosed: 4})
	b := part(2, 2*time.Second, 5*time.Second, map[string]int64{LossClosed: 1, LossReset: 1})
	c := connections(&Hold{HoldSecs: 20, Held: 10, StillOpen: 10, Lasted: Duration(2 * time.Second)})
	before, _ := json.Marshal([]Result{a, b, c})
	m, err := Merge([]Result{a, b, c})
	if err != nil {
		t.Fatal(err)
	}
	l := m.Hold.Loss
	if l == nil || l.Lost != 6 || l.Reasons[LossClosed] != 5 || l.Reasons[LossReset] != 1 ||
		!l.First.Equal(t0.Add(2*time.Second)) || !l.Last.Equal(t0.Add(5*time.Second)) {
		t.Errorf("merged loss %+v", l)
	}
	if m.Hold.Held != 30 || m.Hold.StillOpen != 24 || m.Hold.Lasted != Duration(2*time.Second) || !m.Hold.Start.Equal(t0.Add(time.Second)) {
		t.Errorf("merged hold %+v", m.Hold)
	}
	if after, _ := json.Marshal([]Result{a, b, c}); !bytes.Equal(before, after) {
		t.Error("Merge modified its input")
	}
}

// TestCPUPerAttemptAndPerSuccess: the result file carries the CPU per attempt next to the CPU per
// success, so a run with many failures does not charge their CPU to the few successes.
func TestCPUPerAttemptAndPerSuccess(t *testing.T) {
	srv := Duration(82 * time.Second)
	r := Result{Handshakes: &Handshakes{DurationSecs: 5, Completed: 768, Failed: 27134},
		ClientCPU: Duration(5 * time.Second), ServerCPU: &srv}
	r.Command = CmdHandshakeBench
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Read(b)
	if err != nil {
		t.Fatal(err)
	}
	c := back.CPUPer
	if c == nil || c.Attempts != 27902 || c.Successes != 768 || c.SuccessUnit != "handshake" ||
		*c.ClientPerAttempt != Duration(5*time.Second/27902) || *c.ClientPerSuccess != Duration(5*time.Second/768) ||
		*c.ServerPerAttempt != Duration(82*time.Second/27902) || *c.ServerPerSuccess != Duration(82*time.Second/768) {
		t.Fatalf("cpu_per %s", b)
	}
	// Connections: attempts and established connections; no success, no per-success figure.
	r = Result{Attempts: &Attempts{Attempted: 10, Failed: 10}, ClientCPU: Duration(time.Second)}
	r.Command = CmdConnections
	r.Finish()
	if c := r.CPUPer; c == nil || *c.ClientPerAttempt != Duration(100*time.Millisecond) || c.ClientPerSuccess != nil || c.ServerPerAttempt != nil {
		t.Fatalf("cpu_per %+v", c)
	}
}

// TestMergeHoldRSSSplit: the workers' RSS splits add up kind by kind; one worker without a split
// (off Linux, or an older file) leaves the merged split unknown rather than a partial sum.
func TestMergeHoldRSSSplit(t *testing.T) {
	part := func(s *machine.RSS) Result {
		r := Result{Hold: &Hold{HoldSecs: 1, Held: 1, RSSBaseline: 10, RSSHeld: 20, RSSBaselineSplit: s, RSSHeldSplit: s}}
		r.Command = CmdConnections
		return r
	}
	a := part(&machine.RSS{Total: 10, Anon: 4, File: 5, Shmem: 1})
	b := part(&machine.RSS{Total: 20, Anon: 8, File: 11, Shmem: 1})
	m, err := Merge([]Result{a, b})
	if err != nil {
		t.Fatal(err)
	}
	want := machine.RSS{Total: 30, Anon: 12, File: 16, Shmem: 2}
	if m.Hold.RSSHeldSplit == nil || *m.Hold.RSSHeldSplit != want || *m.Hold.RSSBaselineSplit != want {
		t.Errorf("merged split %+v %+v, want %+v", m.Hold.RSSBaselineSplit, m.Hold.RSSHeldSplit, want)
	}
	if a.Hold.RSSHeldSplit.Total != 10 {
		t.Error("Merge modified its input")
	}
	for _, parts := range [][]Result{{a, part(nil)}, {part(nil), a}} {
		m, err := Merge(parts)
		if err != nil {
			t.Fatal(err)
		}
		if m.Hold.RSSHeldSplit != nil || m.Hold.RSSBaselineSplit != nil {
			t.Errorf("a worker without a split merged to %+v", m.Hold.RSSHeldSplit)
		}
	}
}
