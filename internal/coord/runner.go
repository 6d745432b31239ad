package coord

import (
	"context"
	"time"

	"github.com/loadproof/loadproof/internal/keycastload"
	"github.com/loadproof/loadproof/internal/keycastresult"
	"github.com/loadproof/loadproof/internal/result"
)

// Runner says where a client command run through the cli's cobra tree sends its load. The cli
// builds each tree with one Runner and hands it to the client commands' constructors, so a command
// learns it from its wiring, never from its context:
//
//   - the zero Runner runs the command here, as its command line says (a plain command line);
//   - a worker's tree carries its task's Share (RunWorker hands it to WorkerConfig.Exec): the
//     command runs that segment from the start instant and delivers its result instead of writing
//     its output files;
//   - coordinate's tree carries the Coordinator as Spread: the command hands its configured run to
//     the workers instead of running it here.
//
// At most one of Share and Spread is set.
type Runner struct {
	// Share, on a worker, is the task the command runs.
	Share *Share
	// Spread, under coordinate, runs the command's run on the workers.
	Spread Spread
}

// Share is one worker's part of a coordinated run, as a client command runs it (worker side).
// The task's interval snapshots reach the coordinator through the engine's interval observer in
// the command's context (engine.WithIntervalObserver), the one way every engine run hands out its
// intervals (dashboard, status line, remote write alike).
type Share struct {
	// Segment is this worker's share of the run.
	Segment result.Segment
	// Start is the coordinated start instant in this machine's clock.
	Start time.Time
	// SampleServer says this segment samples the target's own counters each interval; the others
	// do not, so the merged samples count the server once.
	SampleServer bool
	// BarrierPath, when set, is the hold barrier (a Unix socket) the command joins instead of the
	// one its spec names: the worker's relay to the run's barrier on the coordinator's machine.
	BarrierPath string
	// Deliver receives the command's result (required). The command then writes no files and
	// prints no report: the coordinator writes the merged one.
	Deliver func(v any) error
}

// Spread is the coordinator side of a Runner: a client command's run spread over the joined
// workers. *Coordinator is one; tests may give their own.
type Spread interface {
	// KeycastRun replaces keycastload.Run: the run configured by `keycast run` or a
	// `keycast capacity` phase is spread over the workers (see Coordinator.KeycastRun).
	KeycastRun(ctx context.Context, cfg keycastload.RunConfig) (*keycastresult.Results, error)
	// LinkKeysRun replaces a LinkKeys client's local worker processes: it runs the client's worker
	// spec on the workers, one segment each (see Coordinator.LinkKeysRun).
	LinkKeysRun(ctx context.Context, spec string) ([][]byte, error)
	// Count is the number of workers: a LinkKeys client splits into this many segments.
	Count() int
}

var _ Spread = (*Coordinator)(nil)

// KeycastRun is what runs a configured Keycast run: the workers under coordinate, keycastload.Run
// otherwise.
func (r Runner) KeycastRun() func(ctx context.Context, cfg keycastload.RunConfig) (*keycastresult.Results, error) {
	if r.Spread != nil {
		return r.Spread.KeycastRun
	}
	return keycastload.Run
}

// Apply sets a Keycast run configuration's segment, start and sampling from the share (worker
// side); it leaves cfg alone for a nil share.
func (s *Share) Apply(cfg *keycastload.RunConfig) {
	if s == nil {
		return
	}
	cfg.Segment, cfg.Start = s.Segment, s.Start
	cfg.NoServerSample = !s.SampleServer
}
