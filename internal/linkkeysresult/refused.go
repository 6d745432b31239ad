package linkkeysresult

import "github.com/loadproof/loadproof/internal/result"

// Reasons of a refusal by design: what the server's admission control did, by the part of it
// that did it. They key Result.Refused.
const (
	RefusedPublicRead        = "public_read_limiter"     // request-bench: answered Unavailable ("Rate limited")
	RefusedHandshakeSource   = "handshake_per_source"    // per-source handshake limiter closed the handshake
	RefusedHandshakeOverflow = "handshake_overflow"      // distinct-source overflow layer
	RefusedHandshakeGlobal   = "handshake_global"        // global handshake limiter
	RefusedConnectionLimit   = "connection_limit"        // TCP_MAX_CONNECTIONS reached
	statusUnavailable        = "Unavailable"             // the status name of a rate-limited answer
	refusedCause             = result.ClassRefused + ":" // the envelope's cause prefix of a refusal
)

// Remedies says, per refusal reason, what raises the limit: more source addresses or the server
// variable to raise.
var Remedies = map[string]string{
	RefusedPublicRead:        "each source address gets PUBLIC_READ_BURST requests, then PUBLIC_READ_RATE_PER_MINUTE: give more source addresses (--client-ip-count) or raise those on the server",
	RefusedHandshakeSource:   "each source address gets TCP_HANDSHAKE_BURST handshakes, then TCP_HANDSHAKE_RATE_PER_MINUTE: give more source addresses (--client-ip-count) or raise those on the server",
	RefusedHandshakeOverflow: "past TCP_HANDSHAKE_DISTINCT_SOURCE_THRESHOLD new sources share TCP_HANDSHAKE_OVERFLOW_RATE_PER_SECOND/_BURST: raise them on the server",
	RefusedHandshakeGlobal:   "all sources together get TCP_HANDSHAKE_GLOBAL_RATE_PER_SECOND/_BURST: raise them on the server",
	RefusedConnectionLimit:   "the server holds at most TCP_MAX_CONNECTIONS: raise it on the server",
}

// Refusals returns what the server refused by design during the run, by reason: its public-read
// limiter's Unavailable answers (request-bench) and, where the server's accounting was read, the
// handshakes and connections its admission control shed. They are neither failures nor
// throughput. Nil when there were none (or nothing could tell: a handshake the limiter refuses
// looks like a closed stream from the client, so without the server's accounting it stays among
// the failures, as tls_handshake_error_or_server_reject:EOF).
func (r *Result) Refusals() map[string]int64 {
	out := map[string]int64{}
	add := func(k string, v int64) {
		if v > 0 {
			out[k] += v
		}
	}
	if q := r.Requests; q != nil {
		add(RefusedPublicRead, q.Statuses[statusUnavailable])
	}
	for k, v := range r.Causes {
		if len(k) > len(refusedCause) && k[:len(refusedCause)] == refusedCause {
			add(k[len(refusedCause):], v)
		}
	}
	if s := r.Server; s != nil && r.Combined == nil {
		d := s.Delta
		add(RefusedHandshakeSource, d.ShedPerSource)
		add(RefusedHandshakeOverflow, d.ShedOverflow)
		add(RefusedHandshakeGlobal, d.ShedGlobal)
		add(RefusedConnectionLimit, d.ShedConnectionLimit)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
