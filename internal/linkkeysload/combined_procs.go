package linkkeysload

import (
	"context"
	"io"
	"net"
	"os"
	"slices"
	"sync"

	"github.com/loadproof/loadproof/internal/engine"
	"github.com/loadproof/loadproof/internal/result"
)

// Streams in processes of their own (Run.StreamProcesses).
//
// Go's scheduler does not favour a goroutine woken by the network over CPU-bound ones: in one
// process, handshake loops (ECDHE and signatures) starved the request stream to a twentieth of the
// rate it reached alone, so the request figures measured the load generator, not the server
// (docs/benchmarks.md, "`combined` on engine scenarios"). With StreamProcesses the request stream
// runs in worker processes of its own and every other stream (held population, handshakes, ddos
// waves: all of them make handshakes) in others; each group is split over Run.Workers processes as
// a whole run would be. Each worker's spec holds only its group's streams, and the results merge as
// the segments of one run do.
//
// The held population is held until every other stream has ended: the streams of its own process
// tell it through the engine (Worker.OthersDone), the request stream's processes through an
// othersGate, a Unix socket the parent closes once they have all exited.

// splitsStreams reports whether StreamProcesses puts cfg's streams in separate processes: the
// request stream beside at least one other stream.
func (c CombinedConfig) splitsStreams() bool {
	return c.Requests != nil && (c.Held != nil || c.Handshakes != nil || len(c.DDoS) > 0)
}

// processGroups returns the configurations of cfg's process groups: the streams other than the
// request stream first, then the request stream alone.
func (c CombinedConfig) processGroups() []CombinedConfig {
	rest, req := c, c
	rest.Requests = nil
	req.Held, req.Handshakes, req.DDoS = nil, nil, nil
	return []CombinedConfig{rest, req}
}

// combinedSpecs returns the worker specs of a combined run over n processes per group: every
// process of a group runs its segment of the group's streams only. groupOf[i] is process i's group.
func combinedSpecs(cfg CombinedConfig, split bool, seg engine.Segment, n int) (specs []WorkerSpec, groupOf []int) {
	groups := []CombinedConfig{cfg}
	if split {
		groups = cfg.processGroups()
	}
	for g := range groups {
		for i := range n {
			c := groups[g]
			specs = append(specs, WorkerSpec{Command: CmdCombined, Combined: &c, Segment: seg.Sub(n, i)})
			groupOf = append(groupOf, g)
		}
	}
	return specs, groupOf
}

// tidySplit makes the merged result of a split run read as an unsplit one's: each group covered
// the whole run, so its segments are listed once. (The streams' order is the result file's, as
// after any merge of worker results.)
func tidySplit(res *Result) {
	var segs []result.Segment
	for _, s := range res.Segments {
		if !slices.Contains(segs, s) {
			segs = append(segs, s)
		}
	}
	res.Segments = segs
}

// othersGate tells a held population's processes when the processes of the run's other groups
// have all exited: they connect to its Unix socket and wait for it to close. A parent that dies
// closes it too, so a worker never waits on a gate no one will open.
type othersGate struct {
	ln       net.Listener
	dir      string
	path     string
	mu       sync.Mutex
	conns    []net.Conn
	left     int // processes of other groups still running
	released bool
}

// newOthersGate makes a gate that opens once others processes have exited (othersExited).
func newOthersGate(others int) (*othersGate, error) {
	ln, dir, path, err := listenTemp("the combined run's stream gate")
	if err != nil {
		return nil, err
	}
	g := &othersGate{ln: ln, dir: dir, path: path, left: others}
	go g.serve()
	return g, nil
}

func (g *othersGate) serve() {
	for {
		c, err := g.ln.Accept()
		if err != nil {
			return
		}
		g.mu.Lock()
		if g.released {
			c.Close()
		} else {
			g.conns = append(g.conns, c)
		}
		g.mu.Unlock()
	}
}

// othersExited counts one process of another group as ended; the last one opens the gate.
func (g *othersGate) othersExited() {
	g.mu.Lock()
	g.left--
	open := g.left <= 0
	g.mu.Unlock()
	if open {
		g.release()
	}
}

// release opens the gate: every waiting process, and every one that connects later, sees its
// connection close.
func (g *othersGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.released = true
	for _, c := range g.conns {
		c.Close()
	}
	g.conns = nil
}

func (g *othersGate) close() {
	g.release()
	g.ln.Close()
	os.RemoveAll(g.dir)
}

// othersScenario is a worker's wait for the processes of the run's other groups (the gate at path):
// one operation that ends when the gate opens, the parent is gone, or the run ends. The held
// population's hold waits for it as for any other stream (Worker.OthersDone). It counts nothing.
func othersScenario(path string) engine.Scenario {
	wait := engine.DriverFunc(func(ctx context.Context, _ *engine.Worker, _ int64) engine.Outcome {
		var d net.Dialer
		c, err := d.DialContext(ctx, "unix", path)
		if err != nil {
			return engine.Outcome{Skip: true} // no parent to wait for
		}
		stop := context.AfterFunc(ctx, func() { c.Close() })
		defer stop()
		_, _ = io.Copy(io.Discard, c)
		c.Close()
		return engine.Outcome{Skip: true}
	})
	return engine.Scenario{Name: "other-processes", Config: engine.Config{Driver: wait, Count: 1}}
}
