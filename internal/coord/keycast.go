package coord

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"time"

	"github.com/loadproof/loadproof/internal/engine"
	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/keycastload"
	"github.com/loadproof/loadproof/internal/keycastresult"
	"github.com/loadproof/loadproof/internal/result"
)

// KeycastRun spreads one Keycast run over the coordinator's workers: each runs its segment of
// cfg, the coordinator judges cfg.Stop on the merged window, and the workers' results merge into
// the one result file of the whole run (keycastresult.Merge), with the target's own counters read by
// the coordinator before and after. A lost worker or a signal ends the run with the partial results
// of the others (Stop says why); an error means the run could not start.
func (c *Coordinator) KeycastRun(ctx context.Context, cfg keycastload.RunConfig) (*keycastresult.Results, error) {
	if cfg.URL == "" {
		cfg.URL = keycastload.DefaultURL
	}
	if cfg.ReportInterval == 0 {
		cfg.ReportInterval = keycastload.DefaultReportInterval
	}
	interval := time.Second
	opts := TaskOptions{IntervalSecs: interval.Seconds(), Describe: "keycast run", Observe: engine.IntervalObserver(ctx),
		ObserveWorker: engine.WorkerObserver(ctx)}
	if sc := cfg.Stop; sc != nil {
		s := *sc
		if s.Window == 0 {
			s.Window = keycastload.DefaultStopWindow
		}
		opts.Window = int(math.Ceil(s.Window.Seconds() / interval.Seconds()))
		opts.Judge = KeycastJudge(&s)
	}
	before, seriesBefore, errBefore := keycastload.FetchServerMetricsTLS(ctx, cfg.URL, cfg.TLS)
	tr, err := c.RunKeycastTask(ctx, NewKeycastSpec(cfg), opts)
	if err != nil {
		return nil, err
	}
	var parts []*keycastresult.Results
	var bad []error
	started := make([]time.Time, len(tr.Parts))
	defer func() { c.Record(tr, opts.Describe, nil, started) }()
	for i, b := range tr.Parts {
		if b == nil {
			if tr.Errors[i] != "" {
				bad = append(bad, fmt.Errorf("worker %d: %s", i, tr.Errors[i]))
			}
			continue
		}
		p, err := keycastresult.Parse(b)
		if err != nil {
			bad = append(bad, fmt.Errorf("worker %d result: %w", i, err))
			continue
		}
		parts = append(parts, p)
		if p.Envelope != nil {
			started[i] = p.StartedAt
		}
	}
	if len(parts) == 0 {
		if len(bad) == 0 {
			bad = append(bad, errors.New("no worker delivered a result"))
		}
		return nil, fmt.Errorf("coord: the distributed run produced no results: %w", errors.Join(bad...))
	}
	res, err := keycastresult.Merge(parts)
	if err != nil {
		return nil, err
	}
	if res.Envelope != nil && cfg.Flags != nil {
		// The command line the user gave, not a worker's: workers run a typed spec.
		res.Envelope.Flags = maps.Clone(cfg.Flags)
	}
	res.Metadata.Requests = cfg.Requests
	if res.Envelope != nil && cfg.RunID != "" {
		res.Envelope.RunID = cfg.RunID // the whole run's ID, as one machine's run would carry it
	}
	if cfg.Rate > 0 {
		res.Metadata.TargetRate = cfg.Rate
	}
	if tr.Stop != nil {
		s := *tr.Stop
		res.Stop = &s
	}
	after, seriesAfter, errAfter := keycastload.FetchServerMetricsTLS(context.WithoutCancel(ctx), cfg.URL, cfg.TLS)
	if errBefore == nil && errAfter == nil {
		res.ServerMetrics = keycastload.Snapshots(before, after, seriesBefore, seriesAfter)
	}
	if len(bad) > 0 {
		c.log.Warn("some workers delivered no result", "err", errors.Join(bad...))
	}
	return res, nil
}

// KeycastJudge is the coordinator's stop rule for a Keycast run: keycastload.JudgeWindow over the
// merged window, exactly what one machine would judge over its own.
func KeycastJudge(sc *keycastload.StopConditions) Judge {
	lat := hist.New()
	return func(window []result.Interval) *result.StopEvent {
		counts := map[string]int64{}
		lat.Reset()
		for i := range window {
			for k, v := range window[i].Counts {
				counts[k] += v
			}
			if h := window[i].Latency["latency"]; h != nil {
				lat.Merge(h)
			}
		}
		return keycastload.JudgeWindow(sc, counts, lat)
	}
}
