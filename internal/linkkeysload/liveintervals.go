package linkkeysload

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"

	"github.com/loadproof/loadproof/internal/engine"
	"github.com/loadproof/loadproof/internal/result"
)

// Live intervals of local worker processes: a run that fans out to worker processes of this
// binary, under a context with an interval observer (a terminal's status line, a dashboard, remote
// write), asks its workers (WorkerSpec.LiveIntervals) to print every interval snapshot as a line,
// merges the workers' snapshots by index as they come and hands each merged one to the observer,
// as one process would. Only the commands with one engine run per worker do (handshake-bench,
// request-bench, ddos); a run without an observer, and so every run on a pipe, asks nothing and
// prints what it printed before.

// intervalLinePrefix starts a worker's interval line: the prefix, then the snapshot as JSON.
const intervalLinePrefix = workerLinePrefix + "interval "

// maxIntervalLine bounds one interval line; a longer snapshot is not sent (the observer then
// misses that interval; the result file has it).
const maxIntervalLine = 512 << 10

// liveIntervalCommand reports whether a command's workers can send their intervals live.
func liveIntervalCommand(cmd string) bool {
	return cmd == CmdHandshakeBench || cmd == CmdRequestBench || cmd == CmdDDoS
}

// printIntervals returns ctx with an observer that prints every interval snapshot on w as a
// worker interval line.
func printIntervals(ctx context.Context, w io.Writer) context.Context {
	return engine.WithIntervalObserver(ctx, func(iv *result.Interval) {
		b, err := json.Marshal(iv)
		if err != nil || len(b)+len(intervalLinePrefix) >= maxIntervalLine {
			return
		}
		fmt.Fprintf(w, "%s%s\n", intervalLinePrefix, b)
	})
}

// intervalMerger merges the workers' interval snapshots by index (the k-th of every worker is the
// run's k-th) and hands each on once every worker has sent its k-th, in order.
type intervalMerger struct {
	mu      sync.Mutex
	workers int
	per     []int // snapshots received, by worker
	next    int   // the next index to hand on
	pending map[int]*mergedInterval
	observe func(*result.Interval)
}

type mergedInterval struct {
	iv result.Interval
	n  int
}

func newIntervalMerger(workers int, observe func(*result.Interval)) *intervalMerger {
	return &intervalMerger{workers: workers, per: make([]int, workers), pending: map[int]*mergedInterval{}, observe: observe}
}

// line takes a worker's stdout line; it reports whether it was an interval line (a malformed one
// is dropped: it is progress, not the result).
func (m *intervalMerger) line(worker int, line string) bool {
	rest, ok := strings.CutPrefix(line, intervalLinePrefix)
	if !ok {
		return false
	}
	var iv result.Interval
	if worker < 0 || worker >= m.workers || json.Unmarshal([]byte(rest), &iv) != nil {
		return true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	k := m.per[worker]
	m.per[worker]++
	p := m.pending[k]
	if p == nil {
		p = &mergedInterval{iv: result.Interval{T: iv.T, Secs: iv.Secs}}
		m.pending[k] = p
	}
	p.iv.Add(&iv)
	p.n++
	for {
		p := m.pending[m.next]
		if p == nil || p.n < m.workers {
			return true
		}
		delete(m.pending, m.next)
		m.next++
		m.observe(&p.iv)
	}
}

// flush hands on, in order, the intervals some worker never sent its part of (it ended sooner).
func (m *intervalMerger) flush() {
	m.mu.Lock()
	defer m.mu.Unlock()
	keys := make([]int, 0, len(m.pending))
	for k := range m.pending {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	for _, k := range keys {
		m.observe(&m.pending[k].iv)
		delete(m.pending, k)
	}
}
