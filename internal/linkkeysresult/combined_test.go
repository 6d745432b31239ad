package linkkeysresult

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/result"
)

// combinedPart is segment i of 2 of a combined run: a held stream of held connections (lost of
// them closed by the server) and a ddos wave of 10 attempts, 4 denied.
func combinedPart(i int, held, lost int64) Result {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	seg := []result.Segment{{Index: i, Count: 2}}
	stream := func(cmd string, ok, failed int64) *Result {
		r := &Result{Attempts: NewAttempts()}
		for range ok {
			r.Attempts.Add("", "", time.Millisecond)
		}
		for range failed {
			r.Attempts.Add(ClassTLS, ClassTLS+":EOF", time.Millisecond)
		}
		r.Format, r.Harness, r.Command, r.Segments = result.Format, Harness, cmd, seg
		r.StartedAt, r.EndedAt = t0, t0.Add(time.Second)
		r.Envelope.Totals = map[string]int64{result.ClassSuccess: ok, ClassTLS: failed}
		r.Histograms = map[string]*hist.Histogram{KindConnectHandshake: r.Attempts.Latency.Clone()}
		return r
	}
	h, d := stream(CmdConnections, held, 0), stream(CmdDDoS, 6, 4)
	r := Result{Combined: &Combined{Attribution: "none", Streams: []Stream{
		{Name: "ddos-1", Kind: CmdDDoS, Result: d, SourceFirst: "127.5.0.0", SourceCount: 20},
		{Name: StreamHeld, Kind: CmdConnections, Result: h, Survival: &Survival{Established: held, StillOpen: held - lost, LostBy: map[string]int64{"EOF": lost}}},
	}}}
	r.Format, r.Harness, r.Command, r.Segments = result.Format, Harness, CmdCombined, seg
	r.StartedAt, r.EndedAt = t0, t0.Add(2*time.Second)
	env := PrefixEnvelope(StreamHeld, &h.Envelope, 0)
	r.Envelope.Totals, r.Classes = env.Totals, env.Classes
	r.Intervals = []result.Interval{{T: 0, Secs: 1, Counters: map[string]int64{"held/lost": lost}}}
	r.Finish()
	return r
}

func TestMergeCombined(t *testing.T) {
	m, err := Merge([]Result{combinedPart(1, 30, 1), combinedPart(0, 50, 0)})
	if err != nil {
		t.Fatal(err)
	}
	c := m.Combined
	if c == nil || len(c.Streams) != 2 || c.Streams[0].Name != StreamHeld {
		t.Fatalf("%+v", c)
	}
	sv := c.Stream(StreamHeld).Survival
	if sv.Established != 80 || sv.StillOpen != 79 || sv.Lost != 1 || sv.LostBy["EOF"] != 1 || sv.Percent != 98.75 {
		t.Fatalf("survival %+v", sv)
	}
	d := c.Stream("ddos-1").Result
	if d.Attempts.Attempted != 20 || d.Attempts.Failed != 8 || len(d.Segments) != 2 || d.Histograms[KindConnectHandshake].Count() != 12 {
		t.Fatalf("ddos %+v", d.Attempts)
	}
	if m.Envelope.Totals["held/success"] != 80 || m.Intervals[0].Counters["held/lost"] != 1 {
		t.Fatalf("envelope %v %v", m.Envelope.Totals, m.Intervals)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Read(b)
	if err != nil || back.Combined.Stream(StreamHeld).Survival.Percent != 98.75 {
		t.Fatalf("%v", err)
	}
	if _, err := Read([]byte(`{"format":"loadproof.result/v2","harness":"linkkeys","command":"combined","totals":{}}`)); err == nil {
		t.Fatal("read a combined result without its section")
	}
	// A stream that changes kind between parts is refused.
	bad := combinedPart(1, 30, 0)
	bad.Combined.Stream("ddos-1").Kind = CmdConnections
	if _, err := Merge([]Result{combinedPart(0, 50, 0), bad}); err == nil {
		t.Fatal("merged a stream of two kinds")
	}
}
