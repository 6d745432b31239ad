package coord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/loadproof/loadproof/internal/engine"
	"github.com/loadproof/loadproof/internal/linkkeysresult"
)

// LinkKeysRun spreads one LinkKeys client run over the coordinator's workers, as KeycastRun does a
// Keycast run: spec is the client's worker spec for its whole run (or its --segment), the JSON the
// hidden `linkkeys worker --spec` command reads, and every worker gets the same task, running
// segment i/N of it (the spec's segment split again, Segment.Sub) from the coordinated start
// instant. Their interval snapshots merge live: progress lines, and every merged interval to ctx's
// interval observer (engine.WithIntervalObserver), as an engine run on one machine would hand them.
// The connections hold barrier named in the spec is relayed to each worker. It returns each
// worker's result (linkkeysload.Result JSON) in worker order, nil for one that delivered none; a
// worker that failed or was lost makes it return an error with the others' results.
func (c *Coordinator) LinkKeysRun(ctx context.Context, spec string) ([][]byte, error) {
	var head struct {
		Command string `json:"command"`
		Barrier string `json:"barrier"`
	}
	if err := json.Unmarshal([]byte(spec), &head); err != nil {
		return nil, fmt.Errorf("coord: the LinkKeys worker spec is not JSON: %w", err)
	}
	kind := linkkeysresult.KindConnectHandshake
	if head.Command == linkkeysresult.CmdRequestBench {
		kind = linkkeysresult.KindRequest
	}
	describe := "linkkeys " + head.Command
	args := []string{"linkkeys", "worker", "--spec", spec}
	tr, err := c.RunTask(ctx, args, TaskOptions{Describe: describe, BarrierPath: head.Barrier,
		Observe: engine.IntervalObserver(ctx), ObserveWorker: engine.WorkerObserver(ctx), LatencyKind: kind})
	if err != nil {
		return nil, err
	}
	started := make([]time.Time, len(tr.Parts))
	for i, b := range tr.Parts {
		var env struct {
			StartedAt time.Time `json:"started_at"`
		}
		if b != nil && json.Unmarshal(b, &env) == nil {
			started[i] = env.StartedAt
		}
	}
	c.Record(tr, describe, args, started)
	var errs []error
	for i, e := range tr.Errors {
		if e != "" {
			errs = append(errs, fmt.Errorf("worker %d: %s", i, e))
		}
	}
	if tr.Lost != nil {
		errs = append(errs, tr.Lost)
	}
	return tr.Parts, errors.Join(errs...)
}
