package keycastload

import (
	"errors"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/loadproof/loadproof/internal/engine"
	"github.com/loadproof/loadproof/internal/keycastresult"
)

// Connect failures: an attempt whose connection could not be opened (TCP connect refused or timed
// out, TLS handshake failed) never became a request, so it is counted apart (summary
// connect_failures, connect_failure_causes) and in no throughput or latency figure, and the worker
// backs off before its next attempt. Without this a dead target turned every worker into a tight
// loop of refused connects (a million in seconds), each one a sub-millisecond "request" that made
// throughput and p50 look better than the truth.

// Backoff bounds: the first wait after a failed connect, and the most a worker waits.
const (
	backoffBase = 10 * time.Millisecond
	backoffMax  = time.Second
)

// connectCausePrefix marks a connect failure's cause in the engine's causes; Run moves those
// entries to Results.ConnectFailureCauses (interval snapshots keep them under the prefix).
const connectCausePrefix = "connect:"

// connectError is a failure to open a connection: nothing was sent.
type connectError struct{ err error }

func (e *connectError) Error() string { return "connect: " + e.err.Error() }
func (e *connectError) Unwrap() error { return e.err }

// backoff is one worker's bounded exponential backoff after failed connects: 10 ms, doubling up to
// 1 s, each wait drawn within ±50% so that workers spread out; reset by the first connection that
// opens. The zero value is ready.
type backoff struct{ next time.Duration }

// fail moves to the next step and returns how long to wait.
func (b *backoff) fail() time.Duration {
	if b.next == 0 {
		b.next = backoffBase
	} else {
		b.next = min(2*b.next, backoffMax)
	}
	return b.next/2 + time.Duration(rand.Int64N(int64(b.next)+1))
}

func (b *backoff) reset() { b.next = 0 }

// afterExchange handles the connect-failure side of one attempt's outcome. When err is a connect
// failure it logs it like a failed request, waits out the worker's backoff (or until the run ends)
// and returns the connect-failure outcome (no latency, not a request) and true. Otherwise a
// connection was opened: the backoff is reset and it returns false.
func (r *runner) afterExchange(ew *engine.Worker, wk *worker, num uint64, err error, start time.Time) (engine.Outcome, bool) {
	if err == nil {
		wk.delay.reset()
		return engine.Outcome{}, false
	}
	return r.connectFailure(ew, wk, num, err, start)
}

// connectFailure is afterExchange's failure side, apart so that the error target errors.As needs
// (a variable that escapes to the heap) is made only for a failed exchange, not once per request.
func (r *runner) connectFailure(ew *engine.Worker, wk *worker, num uint64, err error, start time.Time) (engine.Outcome, bool) {
	var ce *connectError
	if !errors.As(err, &ce) {
		wk.delay.reset()
		return engine.Outcome{}, false
	}
	r.logFailure(num, err.Error())
	tm := time.NewTimer(wk.delay.fail())
	select {
	case <-tm.C:
	case <-ew.Done():
		tm.Stop()
	}
	return engine.Outcome{Class: uint8(classConnectFailure), Cause: connectCausePrefix + NetworkCause(ce.err), NoLatency: true, Start: start}, true
}

// isDialError reports whether a net/http failure (the register method) happened while connecting.
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// splitConnectCauses moves the connect failures' causes out of the envelope's causes (where the
// engine counts them under connectCausePrefix) into ConnectFailureCauses.
func splitConnectCauses(res *keycastresult.Results) {
	if res.Envelope == nil {
		return
	}
	for k, v := range res.Causes {
		if cause, ok := strings.CutPrefix(k, connectCausePrefix); ok {
			if res.ConnectFailureCauses == nil {
				res.ConnectFailureCauses = map[string]int64{}
			}
			res.ConnectFailureCauses[cause] += v
			delete(res.Causes, k)
		}
	}
	if len(res.Causes) == 0 {
		res.Causes = nil
	}
}

// connectNote is the progress line's tail: ", connect failures=N" once there are any.
func connectNote(c keycastresult.Counts) string {
	if c.ConnectFailures == 0 {
		return ""
	}
	return ", connect failures=" + strconv.FormatUint(c.ConnectFailures, 10)
}
