package linkkeysload

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/engine"
	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/linkkeys"
)

// randomParts records n random outcomes into a Result of each section, deterministically from seed.
func randomParts(seed uint64, parts int, n int) (whole Result, split []Result) {
	rng := rand.New(rand.NewPCG(seed, 1))
	t0 := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	mk := func(i int) Result {
		return Result{Command: CmdRequestBench, Start: t0.Add(time.Duration(i) * time.Millisecond), End: t0.Add(time.Minute + time.Duration(i)*time.Second),
			Segments: []engine.Segment{{Index: i, Count: parts}}, Attempts: newAttempts(),
			Hold:       &Hold{HoldSecs: 20},
			Handshakes: &Handshakes{DurationSecs: 10, ResumedLatency: hist.New()},
			Requests:   &Requests{DurationSecs: 10, Statuses: map[string]int64{}, Latency: hist.New(), Uncorrected: hist.New()}}
	}
	whole = mk(0)
	whole.Segments = nil
	for i := range parts {
		split = append(split, mk(i))
	}
	stages := []Failure{{}, {}, {}, {Stage: StageConnect, Detail: "EADDRNOTAVAIL"}, {Stage: StageTLS, Detail: "EOF"}, {Stage: StageTimeout}}
	for k := range n {
		p := &split[k%parts]
		f := stages[rng.IntN(len(stages))]
		d := time.Duration(rng.ExpFloat64() * float64(3*time.Millisecond))
		for _, r := range []*Result{&whole, p} {
			r.Attempts.record(f, d)
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
	whole.Start, whole.End = split[0].Start, split[parts-1].End
	for i := range parts {
		whole.Segments = append(whole.Segments, engine.Segment{Index: i, Count: parts})
	}
	whole.finish()
	return whole, split
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
	if _, err := Merge([]Result{{Command: CmdDDoS}, {Command: CmdConnections}}); err == nil {
		t.Fatal("mixed commands accepted")
	}
}

func TestResultJSONRoundTrip(t *testing.T) {
	whole, _ := randomParts(3, 1, 500)
	whole.Flags = map[string]string{"count": "500"}
	rss := uint64(1 << 20)
	whole.Server = NewServerAccounting("x", linkkeys.MetricsLine{Label: "running"}, linkkeys.MetricsLine{Label: "final", AcceptedConnections: 500, ProcessRSSBytes: &rss}, 500, 400, 100, true)
	b1, err := json.Marshal(whole)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ReadResult(b1)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := json.Marshal(back)
	if !bytes.Equal(b1, b2) {
		t.Fatalf("round trip differs:\n%s\n%s", b1, b2)
	}
	if !reflect.DeepEqual(back.Attempts.Reasons, whole.Attempts.Reasons) || back.Requests.Latency.Count() != 500 {
		t.Fatal("round trip lost data")
	}
	for _, bad := range []string{`{}`, `{"format":"other","command":"ddos"}`, `{"format":"` + ResultFormat + `","command":"nope"}`, `not json`} {
		if _, err := ReadResult([]byte(bad)); err == nil {
			t.Errorf("ReadResult accepted %s", bad)
		}
	}
}

func FuzzReadResult(f *testing.F) {
	whole, _ := randomParts(5, 1, 20)
	b, _ := json.Marshal(whole)
	f.Add(b)
	f.Add([]byte(`{"format":"` + ResultFormat + `","command":"ddos","attempts":{"connect_handshake_latency":{"hdr":"x"}}}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ReadResult(b)
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
	part := func(lost int64, first, last time.Duration, reasons map[string]int64) Result {
		return Result{Command: CmdConnections, Hold: &Hold{HoldSecs: 20, Held: 10, StillOpen: 10 - lost, Start: t0.Add(first - time.Second),
			Lasted: Duration(time.Second), Loss: &HoldLoss{Lost: lost, Reasons: reasons, First: t0.Add(first), Last: t0.Add(last)}}}
	}
	a := part(4, 3*time.Second, 4*time.Second, map[string]int64{"closed_by_server": 4})
	b := part(2, 2*time.Second, 5*time.Second, map[string]int64{"closed_by_server": 1, "reset": 1})
	c := Result{Command: CmdConnections, Hold: &Hold{HoldSecs: 20, Held: 10, StillOpen: 10, Lasted: Duration(2 * time.Second)}}
	before, _ := json.Marshal([]Result{a, b, c})
	m, err := Merge([]Result{a, b, c})
	if err != nil {
		t.Fatal(err)
	}
	l := m.Hold.Loss
	if l == nil || l.Lost != 6 || l.Reasons["closed_by_server"] != 5 || l.Reasons["reset"] != 1 ||
		!l.First.Equal(t0.Add(2*time.Second)) || !l.Last.Equal(t0.Add(5*time.Second)) {
		t.Errorf("merged loss %+v", l)
	}
	if m.Hold.Held != 30 || m.Hold.StillOpen != 24 || m.Hold.Lasted != Duration(2*time.Second) || !m.Hold.Start.Equal(t0.Add(time.Second)) {
		t.Errorf("merged hold %+v", m.Hold)
	}
	if after, _ := json.Marshal([]Result{a, b, c}); !bytes.Equal(before, after) {
		t.Error("Merge modified its input")
	}
	// holdLoss: the count at the end is authoritative; reasons not seen are unknown.
	if got := holdLoss(3, HoldLoss{Reasons: map[string]int64{"reset": 1}}); got.Lost != 3 || got.Reasons["reset"] != 1 || got.Reasons["unknown"] != 2 {
		t.Errorf("holdLoss %+v", got)
	}
	if holdLoss(0, HoldLoss{Reasons: map[string]int64{"reset": 1}}) != nil {
		t.Error("a hold with nothing lost has a loss")
	}
}

// TestCPUPerAttemptAndPerSuccess: the result file carries the CPU per attempt next to the CPU per
// success, so a run with many failures does not charge their CPU to the few successes.
func TestCPUPerAttemptAndPerSuccess(t *testing.T) {
	srv := Duration(82 * time.Second)
	r := Result{Command: CmdHandshakeBench, Handshakes: &Handshakes{DurationSecs: 5, Completed: 768, Failed: 27134},
		ClientCPU: Duration(5 * time.Second), ServerCPU: &srv}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ReadResult(b)
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
	r = Result{Command: CmdConnections, Attempts: &Attempts{Attempted: 10, Failed: 10}, ClientCPU: Duration(time.Second)}
	r.finish()
	if c := r.CPUPer; c == nil || *c.ClientPerAttempt != Duration(100*time.Millisecond) || c.ClientPerSuccess != nil || c.ServerPerAttempt != nil {
		t.Fatalf("cpu_per %+v", c)
	}
}
