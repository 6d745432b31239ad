package engine

import (
	"context"

	"github.com/loadproof/loadproof/internal/result"
)

type observerKey struct{}

// WithIntervalObserver returns a context under which every Execute also hands each interval
// snapshot, as it closes, to fn (after Config.OnInterval). It is how a command attaches a live view
// (the dashboard) to runs whose Config is built deep inside a driver package, the way
// net/http/httptrace attaches a trace to requests: the observer travels with the run's context,
// not through every configuration struct on the way. An observer ctx already carries keeps
// receiving every snapshot, before fn (a distributed worker's snapshot publisher and a dashboard
// both see the run). fn runs on the collector goroutine: it must return quickly and must not keep
// the interval.
func WithIntervalObserver(ctx context.Context, fn func(iv *result.Interval)) context.Context {
	if fn == nil {
		return ctx
	}
	if outer := IntervalObserver(ctx); outer != nil {
		inner := fn
		fn = func(iv *result.Interval) {
			outer(iv)
			inner(iv)
		}
	}
	return context.WithValue(ctx, observerKey{}, fn)
}

// IntervalObserver returns the observer attached to ctx, or nil.
func IntervalObserver(ctx context.Context) func(iv *result.Interval) {
	fn, _ := ctx.Value(observerKey{}).(func(iv *result.Interval))
	return fn
}

// observe composes ctx's observer into cfg.OnInterval.
func observe(ctx context.Context, cfg Config) Config {
	obs := IntervalObserver(ctx)
	if obs == nil {
		return cfg
	}
	inner := cfg.OnInterval
	cfg.OnInterval = func(iv *result.Interval, t *Totals) {
		if inner != nil {
			inner(iv, t)
		}
		obs(iv)
	}
	return cfg
}

type resultHookKey struct{}

// WithResultHook returns a context under which a command's result writer calls fn on the run's
// envelope just before writing it: how an observer of the run's intervals (remote write) records
// what it did in the result file itself, through the same context that carried the observer.
func WithResultHook(ctx context.Context, fn func(e *result.Envelope)) context.Context {
	if fn == nil {
		return ctx
	}
	if outer := ResultHook(ctx); outer != nil {
		inner := fn
		fn = func(e *result.Envelope) {
			outer(e)
			inner(e)
		}
	}
	return context.WithValue(ctx, resultHookKey{}, fn)
}

// ResultHook returns the hook attached to ctx, or nil.
func ResultHook(ctx context.Context) func(e *result.Envelope) {
	fn, _ := ctx.Value(resultHookKey{}).(func(e *result.Envelope))
	return fn
}

type phaseHookKey struct{}

// WithPhaseHook returns a context under which StartPhase calls fn with each phase's name: how an
// observer of a run's intervals (remote write) learns that a capacity plan moved to its next phase.
func WithPhaseHook(ctx context.Context, fn func(name string)) context.Context {
	if fn == nil {
		return ctx
	}
	if outer, _ := ctx.Value(phaseHookKey{}).(func(string)); outer != nil {
		inner := fn
		fn = func(name string) {
			outer(name)
			inner(name)
		}
	}
	return context.WithValue(ctx, phaseHookKey{}, fn)
}

// StartPhase tells ctx's phase hook, if any, that the phase name begins.
func StartPhase(ctx context.Context, name string) {
	if fn, _ := ctx.Value(phaseHookKey{}).(func(string)); fn != nil {
		fn(name)
	}
}

type workerObserverKey struct{}

// WithWorkerObserver returns a context under which a coordinated run hands fn each worker's own
// interval snapshots (worker: its index and join name) beside the merged ones the interval observer
// receives: how remote write keeps per-host series.
func WithWorkerObserver(ctx context.Context, fn func(index int, name string, iv *result.Interval)) context.Context {
	if fn == nil {
		return ctx
	}
	if outer := WorkerObserver(ctx); outer != nil {
		inner := fn
		fn = func(index int, name string, iv *result.Interval) {
			outer(index, name, iv)
			inner(index, name, iv)
		}
	}
	return context.WithValue(ctx, workerObserverKey{}, fn)
}

// WorkerObserver returns ctx's worker observer, or nil.
func WorkerObserver(ctx context.Context) func(index int, name string, iv *result.Interval) {
	fn, _ := ctx.Value(workerObserverKey{}).(func(int, string, *result.Interval))
	return fn
}
