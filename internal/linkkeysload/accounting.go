package linkkeysload

import (
	"github.com/loadproof/loadproof/internal/linkkeys"
	"github.com/loadproof/loadproof/internal/linkkeysresult"
)

// NewServerAccounting computes the deltas between two readings and checks them against the client's
// attempts: every attempt must have reached the server (attempts = accepted), and the server must
// account for each one as admitted or shed (attempts = admitted + shed); when the server reports
// completed handshakes, the client's successes must equal them and its failures must equal the
// server's sheds, handshake rejections and timeouts.
func NewServerAccounting(source string, before, after linkkeys.MetricsLine, attempts, succeeded, failed int64, settled bool) *ServerAccounting {
	d := linkkeysresult.Deltas{
		Accepted:            sub(after.AcceptedConnections, before.AcceptedConnections),
		Admitted:            sub(after.Admitted(), before.Admitted()),
		HandshakeRejections: sub(after.HandshakeRejections, before.HandshakeRejections),
		HandshakeTimeouts:   sub(after.HandshakeTimeouts, before.HandshakeTimeouts),
		ShedConnectionLimit: sub(after.ShedConnectionLimit, before.ShedConnectionLimit),
		ShedPerSource:       sub(after.ShedHandshakePerSource, before.ShedHandshakePerSource),
		ShedOverflow:        sub(after.ShedHandshakeOverflow, before.ShedHandshakeOverflow),
		ShedGlobal:          sub(after.ShedHandshakeGlobal, before.ShedHandshakeGlobal),
	}
	a, aok := after.HandshakesCompleted()
	b, bok := before.HandshakesCompleted()
	if aok && bok {
		d.HandshakesCompleted, d.HasCompleted = sub(a, b), true
	}
	acc := &ServerAccounting{Source: source, Before: before, After: after, Delta: d, Settled: settled}
	check := func(name string, client, server int64) {
		acc.Checks = append(acc.Checks, linkkeysresult.Check{Name: name, Client: client, Server: server, OK: client == server})
	}
	check("attempts = server accepted_connections", attempts, d.Accepted)
	check("attempts = server admitted + shed", attempts, d.Admitted+d.Shed())
	if d.HasCompleted {
		check("allowed = server handshakes completed", succeeded, d.HandshakesCompleted)
		check("denied = server shed + handshake rejections + timeouts", failed, d.Shed()+d.HandshakeRejections+d.HandshakeTimeouts)
	} else {
		acc.Note = "the server reports no cumulative count of completed handshakes, so allowed and denied are checked only through accepted and admitted"
	}
	return acc
}

func sub(a, b uint64) int64 { return int64(a) - int64(b) }

// rateLimitedField is the METRICS field counting the public-read limiter's refusals.
const rateLimitedField = "rate_limited_responses"

// CheckRateLimited adds request-bench's check of its refused answers (status Unavailable) against
// the server's public-read limiter count, when both readings carry that count (a server that does
// not report it gets no check).
func CheckRateLimited(acc *ServerAccounting, before, after linkkeys.MetricsLine, unavailable int64) {
	if acc == nil || !before.Has(rateLimitedField) || !after.Has(rateLimitedField) {
		return
	}
	server := sub(after.RateLimitedResponses, before.RateLimitedResponses)
	acc.Checks = append(acc.Checks, linkkeysresult.Check{Name: "refused answers = server rate_limited_responses",
		Client: unavailable, Server: server, OK: unavailable == server})
}
