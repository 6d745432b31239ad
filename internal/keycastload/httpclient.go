package keycastload

import (
	"context"
	"time"

	"github.com/loadproof/loadproof/internal/httpwire"
)

// HTTP clients of `run` (RunConfig.HTTPClient).
const (
	// HTTPClientFast is the hand-written HTTP/1.1 client (client.go), the default: what it saves
	// per request is measured in docs/benchmarks.md ("Keycast load generator").
	HTTPClientFast = "fast"
	// HTTPClientStd runs the same load over net/http (stdclient.go): the escape hatch when the
	// fast client is in doubt, and the reference its results are compared with.
	HTTPClientStd = "std"
)

// httpClient sends one /api/nostr request and reads its response. Both clients send the same
// request (head, cookies, body) and return the same Response, which Classify judges; errors
// are transport failures (a *connectError when no connection could be opened). end is when the
// exchange ended (one clock reading, which the fast client also stamps its pooled connection with).
type httpClient interface {
	exchange(ctx context.Context, wk *worker, u *userClient, body []byte, start time.Time) (resp httpwire.Response, end time.Time, err error)
	// cutOff interrupts every request in flight (the run is ending).
	cutOff()
	// closeIdle closes the pooled connections at the end of the run.
	closeIdle()
}
