package linkkeysload_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/engine"
	"github.com/loadproof/loadproof/internal/linkkeysload"
	"github.com/loadproof/loadproof/internal/linkkeysresult"
)

// The connections timeline covers the ramp, the hold and the close, against the real server: 100 ms
// intervals (a run under 30 s), the held gauge at the held count through the hold, with the
// server's own samples beside it, and every held connection counted as it is closed.
func TestConnectionsTimelineCoversTheHold(t *testing.T) {
	rs := startReal(t, config(t, scaleProfile))
	const count = 60
	cfg := linkkeysload.ConnectionsConfig{Target: rs.target, Count: count, Concurrency: 8, HoldSecs: 1, AttemptTimeout: 10 * time.Second,
		Sources: linkkeysload.SourceAddrs{Base: ip(t, "127.0.45.0"), Count: 8}, ProgressEvery: 100}
	var out bytes.Buffer
	res, err := linkkeysload.Connections(context.Background(), cfg, linkkeysload.Run{Stdout: &out,
		Metrics: &linkkeysload.MetricsSource{Location: rs.log}, SettleWait: 10 * time.Second})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if res.Hold.Held != count || res.Hold.StillOpen != count {
		t.Fatalf("hold %+v\n%s", res.Hold, out.String())
	}
	if res.IntervalSecs != engine.FineInterval.Seconds() {
		t.Fatalf("interval_secs %g, want %g for a run under 30 s", res.IntervalSecs, engine.FineInterval.Seconds())
	}
	checkHoldTimeline(t, res, count, count)

	// The result file keeps the timeline: it reads back, validated, with the same gauges.
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	back, err := linkkeysresult.Read(b)
	if err != nil {
		t.Fatalf("reading the result back: %v", err)
	}
	if len(back.Intervals) != len(res.Intervals) || back.IntervalSecs != res.IntervalSecs {
		t.Fatalf("read back %d intervals of %g s, wrote %d of %g s", len(back.Intervals), back.IntervalSecs, len(res.Intervals), res.IntervalSecs)
	}
	for i := range back.Intervals {
		if back.Intervals[i].Gauges[linkkeysresult.GaugeHeld] != res.Intervals[i].Gauges[linkkeysresult.GaugeHeld] {
			t.Fatalf("interval %d: held %v read back, %v written", i, back.Intervals[i].Gauges, res.Intervals[i].Gauges)
		}
	}
}

// checkHoldTimeline checks a connections result's timeline: after the last attempt, intervals
// whose held gauge is held (the whole population, summed over every process holding it) span at
// least half the hold, at least one of them carries a server sample counting every held
// connection open (when serverOpen > 0), the gauge never exceeds held and ends at 0, and the close
// counters account for every connection established.
func checkHoldTimeline(t *testing.T, res linkkeysload.Result, held, serverOpen int64) {
	t.Helper()
	last := -1
	for i, iv := range res.Intervals {
		if iv.Total() > 0 {
			last = i
		}
	}
	if last < 0 {
		t.Fatal("no interval counts an attempt")
	}
	var holdSecs float64
	sampled := false
	closed := map[string]int64{}
	for i, iv := range res.Intervals {
		g, ok := iv.Gauges[linkkeysresult.GaugeHeld]
		if !ok || g > held {
			t.Fatalf("interval %d at %.2fs: held gauge %v (present %v), at most %d", i, iv.T, g, ok, held)
		}
		for _, k := range linkkeysresult.ConnectionsCounters {
			closed[k] += iv.Counters[k]
		}
		if i <= last || g != held {
			continue
		}
		holdSecs += iv.Secs
		if serverOpen > 0 && iv.Server["open_connections"] == float64(serverOpen) {
			sampled = true
		}
	}
	lasted := time.Duration(res.Hold.Lasted).Seconds()
	if holdSecs < lasted/2 {
		t.Fatalf("intervals holding %d span %.2fs of a %.2fs hold", held, holdSecs, lasted)
	}
	if serverOpen > 0 && !sampled {
		t.Fatalf("no interval of the hold carries a server sample of %d open connections", serverOpen)
	}
	if g := res.Intervals[len(res.Intervals)-1].Gauges[linkkeysresult.GaugeHeld]; g != 0 {
		t.Fatalf("the last interval holds %d, want 0 after the close", g)
	}
	var sum int64
	for _, n := range closed {
		sum += n
	}
	if sum != res.Hold.Held || closed[linkkeysresult.CounterClosedByClient] != res.Hold.StillOpen {
		t.Fatalf("closes %v: want %d in all, %d closed by the client", closed, res.Hold.Held, res.Hold.StillOpen)
	}
}
