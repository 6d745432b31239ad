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
// handshakes and connections its admission control shed (for handshake-bench and request-bench no
// more than the attempts the client saw end as a shed one does: AttributeShed, ClosedAtHandshake;
// connections and ddos take the server's counts whole). They are neither failures nor
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
		shed := s.Delta.ShedByReason()
		if r.Command == CmdHandshakeBench || r.Command == CmdRequestBench {
			// A busy server may shed other clients' attempts too: attribute no more than this
			// client saw end the way a shed attempt ends.
			shed = AttributeShed(shed, r.ClosedAtHandshake())
		}
		for _, rs := range shed {
			add(rs.Reason, rs.Count)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// ReasonCount is a number of refusals by design of one reason.
type ReasonCount struct {
	Reason string
	Count  int64
}

// ShedByReason returns the server's sheds over the run by refusal reason, in the order the server
// decides them (connection limit first, right after accept; then the per-source bucket, the
// overflow bucket and the global bucket). Reasons with no shed are left out.
func (d Deltas) ShedByReason() []ReasonCount {
	var out []ReasonCount
	for _, rc := range []ReasonCount{
		{RefusedConnectionLimit, d.ShedConnectionLimit},
		{RefusedHandshakeSource, d.ShedPerSource},
		{RefusedHandshakeOverflow, d.ShedOverflow},
		{RefusedHandshakeGlobal, d.ShedGlobal},
	} {
		if rc.Count > 0 {
			out = append(out, rc)
		}
	}
	return out
}

// AttributeShed caps the server's sheds at seen, the client's attempts that ended the way a shed
// attempt ends (ClosedAtHandshake): the sheds are taken reason by reason in their order until seen
// is used up, so no more refusals are attributed to the client than it saw, and none are when it
// saw none.
func AttributeShed(shed []ReasonCount, seen int64) []ReasonCount {
	var out []ReasonCount
	for _, rc := range shed {
		n := min(rc.Count, seen)
		if n <= 0 {
			break
		}
		out = append(out, ReasonCount{rc.Reason, n})
		seen -= n
	}
	return out
}

// ShedEndings are the detailed reasons of a connection attempt the server's admission control
// turned away, as the client sees it: the server closes the socket before any TLS byte, which
// ends the handshake with EOF, or with a reset when the client's hello was still unread, or with
// a broken pipe when the hello was written after the close.
var ShedEndings = []string{ClassTLS + ":EOF", ClassTLS + ":ECONNRESET", ClassTLS + ":EPIPE"}

// ClosedAtHandshake counts the run's connection attempts that ended the way a shed attempt ends
// (ShedEndings): the most refusals by design the server's accounting can explain among them.
func (r *Result) ClosedAtHandshake() int64 {
	if r.Attempts == nil {
		return 0
	}
	var n int64
	for _, k := range ShedEndings {
		n += max(r.Attempts.Reasons[k], 0)
	}
	return n
}
