package keycastload

import (
	"context"
	"errors"
	"time"

	"github.com/loadproof/loadproof/internal/engine"
)

// The end of a run. At the end of the duration no new request starts; those in flight get
// RunConfig.Drain (5 s by default, at most the request timeout) to finish, and are then cut off, as
// they are at a live stop condition or a signal. A cut-off request's outcome is unknown: it is not a
// success or a failure and has no latency, so it is counted in summary cut_off_requests alone. A run
// therefore ends at most duration + drain after its workers start, whatever the server does (one
// that accepts and never answers used to hold it for the whole request timeout). The server-metrics
// fetches around the run are bounded by metricsTimeout each, and the one after is skipped when the
// one before failed.

// cutOffOutcome is the outcome of a request cut off in flight, err being how it ended: counted in
// its own class with no latency. An attempt cut off before its request was sent (while connecting,
// or before the write) was never in flight and is not counted. In the open model a counted one
// uses its ticket, so open_model.dropped keeps meaning "never attempted".
func (r *runner) cutOffOutcome(err error, start time.Time) engine.Outcome {
	var ce *connectError
	if errors.As(err, &ce) || err == context.Canceled || isDialError(err) {
		return engine.Outcome{Skip: true}
	}
	return engine.Outcome{Class: uint8(classCutOff), NoLatency: true, Start: start}
}
