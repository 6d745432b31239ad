package linkkeysserver

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/loadproof/loadproof/internal/linkkeys"
)

// Parent is the parent process of a --processes server: it owns the children (a Supervisor), sums
// their counters into the one METRICS line clients read, optionally prints each child's line, keeps
// the last sum for a Prometheus endpoint, and at the end forwards the stop signal, prints nothing
// itself but returns the final sum, and waits for the children.
type Parent struct {
	Supervisor *Supervisor
	// PerProcess, when set, receives a PROCESS_METRICS line per child with every sum.
	PerProcess io.Writer
	Logger     *slog.Logger

	startOnce sync.Once
	start     time.Time
	mu        sync.Mutex
	last      Snapshot
	collected bool // last holds a sum
	quiet     bool // what the children were last told: "quiet" (true) or "busy"
}

// quietTurn reports whether the server took no connection and processed no frame between the
// sums prev and cur, and whether that differs from what the children were last told.
func quietTurn(prev, cur Snapshot, told bool) (quiet, turn bool) {
	quiet = cur.AcceptedConnections == prev.AcceptedConnections && cur.FramesProcessed == prev.FramesProcessed
	return quiet, quiet != told
}

// Collect asks every child for its counters (the final ones when final is set), sums them,
// labels the sum "running" or "final" and remembers it for Last.
func (p *Parent) Collect(final bool) Snapshot {
	p.startOnce.Do(func() { p.start = time.Now() })
	per, err := p.Supervisor.Snapshot(final, 10*time.Second)
	if err != nil && p.Logger != nil {
		p.Logger.Warn("collecting child metrics", "err", err)
	}
	sum := SumSnapshots(per...)
	sum.ElapsedSecs = time.Since(p.start).Seconds()
	sum.Label = "running"
	if final {
		sum.Label = "final"
	}
	if p.PerProcess != nil {
		for i, s := range per {
			b := linkkeys.AppendMetricsLine(nil, s.MetricsLine)
			fmt.Fprintf(p.PerProcess, "PROCESS_METRICS %d %s\n", i, strings.TrimPrefix(string(b), linkkeys.MetricsPrefix))
		}
	}
	// Tell the children when the whole server turns quiet or busy: a child of a sequential fill
	// holds its memory release back until the whole server is quiet (MemoryReleaser.Hold).
	word := ""
	p.mu.Lock()
	if p.collected && !final {
		if quiet, turn := quietTurn(p.last, sum, p.quiet); turn {
			p.quiet, word = quiet, childBusy
			if quiet {
				word = childQuiet
			}
		}
	}
	p.last, p.collected = sum, true
	p.mu.Unlock()
	if word != "" {
		p.Supervisor.Tell(word)
	}
	return sum
}

// Last returns the most recent sum (for a Prometheus endpoint, which must not make every scrape
// a round trip to every child).
func (p *Parent) Last() Snapshot {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// Finish ends the children: sig (nil when the run ended on its own) is forwarded so they print
// their final lines as on "final", the final sum is collected, and the children get wait to exit.
func (p *Parent) Finish(sig os.Signal, wait time.Duration) Snapshot {
	if sig != nil {
		p.Supervisor.Signal(sig)
	}
	final := p.Collect(true)
	if err := p.Supervisor.Wait(wait); err != nil && p.Logger != nil {
		p.Logger.Warn("server processes did not exit cleanly", "err", err)
	}
	return final
}
