package linkkeysload

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/engine"
	"github.com/loadproof/loadproof/internal/result"
	"github.com/loadproof/loadproof/internal/testwait"
)

// A fanned-out combined run's server samples come from the parent's run, on a clock started with
// the workers': each lands in the interval of its index, and intervals the workers' results end
// before are added after their last, keeping the timeline in order.
func TestAttachServerKeepsTheTimelineInOrder(t *testing.T) {
	res := Result{}
	res.Format, res.Harness, res.Command = result.Format, "linkkeys", CmdCombined
	res.Intervals = []result.Interval{{T: 0, Secs: 1}, {T: 1.2, Secs: 1}}
	run := []result.Interval{{T: 0, Secs: 1}, {T: 1, Secs: 1}, {T: 2, Secs: 1, Server: map[string]float64{"x": 1}}, {T: 3, Secs: 0.5, Server: map[string]float64{"x": 2}}}
	attachServer(&res.Envelope, run)
	if err := res.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(res.Intervals) != 4 || res.Intervals[2].Server["x"] != 1 || res.Intervals[3].Server["x"] != 2 || res.Intervals[1].Server != nil {
		t.Fatalf("%+v", res.Intervals)
	}
	for i := 1; i < len(res.Intervals); i++ {
		if res.Intervals[i].T < res.Intervals[i-1].T {
			t.Fatalf("interval %d starts at %v, before %v", i, res.Intervals[i].T, res.Intervals[i-1].T)
		}
	}
	if res.Intervals[3].Secs != 0.5 {
		t.Fatalf("added interval %+v", res.Intervals[3])
	}
}

// With StreamProcesses, each worker's spec holds only its group's streams: the request stream's
// processes run nothing else, and the others run every stream but it. Without, every process runs
// a share of every stream.
func TestCombinedSpecsHoldOnlyTheirStreams(t *testing.T) {
	cfg := CombinedConfig{Held: &HeldStream{Count: 10}, Handshakes: &HandshakeStream{Concurrency: 4},
		Requests: &RequestStream{Connections: 2}, DDoS: []DDoSWave{{Sources: 5}}}
	if !cfg.splitsStreams() {
		t.Fatal("a request stream beside handshakes is not split")
	}
	specs, groupOf := combinedSpecs(cfg, true, engine.Whole, 2)
	if len(specs) != 4 || !slices.Equal(groupOf, []int{0, 0, 1, 1}) {
		t.Fatalf("%d specs, groups %v", len(specs), groupOf)
	}
	for i, s := range specs {
		c := s.Combined
		if s.Command != CmdCombined || s.Segment != engine.Whole.Sub(2, i%2) {
			t.Fatalf("spec %d: %+v", i, s)
		}
		hasReq, hasOthers := c.Requests != nil, c.Held != nil && c.Handshakes != nil && len(c.DDoS) == 1
		if groupOf[i] == 0 && (hasReq || !hasOthers) || groupOf[i] == 1 && (!hasReq || c.Held != nil || c.Handshakes != nil || len(c.DDoS) > 0) {
			t.Fatalf("spec %d (group %d) holds %+v", i, groupOf[i], c)
		}
	}
	specs, _ = combinedSpecs(cfg, false, engine.Whole, 2)
	if len(specs) != 2 || specs[0].Combined.Requests == nil || specs[1].Combined.Handshakes == nil {
		t.Fatalf("unsplit specs %+v", specs)
	}
	for _, alone := range []CombinedConfig{{Requests: cfg.Requests}, {Handshakes: cfg.Handshakes, Held: cfg.Held}} {
		if alone.splitsStreams() {
			t.Fatalf("%+v is split", alone)
		}
	}
}

// The gate opens when the last process of the other groups has exited: a held process waiting on
// it sees its connection close then, not before, and one that connects later sees it close at once.
func TestOthersGateOpensWhenTheOthersHaveExited(t *testing.T) {
	g, err := newOthersGate(2)
	if err != nil {
		t.Fatal(err)
	}
	defer g.close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // the deadline
	defer cancel()
	sc := othersScenario(g.path)
	ended := make(chan struct{})
	go func() { // the held process's wait
		sc.Config.Driver.Do(ctx, nil, 0)
		close(ended)
	}()
	// The first exit must find the waiter connected.
	testwait.Eventually(t, 10*time.Second, "the waiter to connect", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.conns) == 1
	})
	g.othersExited()
	g.mu.Lock()
	open := g.released || len(g.conns) != 1
	g.mu.Unlock()
	if open {
		t.Fatal("the gate opened with one of the other processes still running")
	}
	g.othersExited()
	testwait.Recv(t, ended, 10*time.Second, "the gate to open when the other processes had exited")
	late := make(chan struct{})
	go func() {
		sc.Config.Driver.Do(ctx, nil, 0)
		close(late)
	}()
	testwait.Recv(t, late, 10*time.Second, "a process connecting after the gate opened to go on")
}
