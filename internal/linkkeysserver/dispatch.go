package linkkeysserver

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/loadproof/loadproof/internal/admit"
	"github.com/loadproof/loadproof/internal/linkkeys"
)

// Error texts the server sends (docs/protocol-linkkeys.md, Checks before
// dispatch and Operations).
const (
	msgExcessiveDepth  = "Malformed request: excessive nesting depth"
	msgMalformed       = "Malformed request"
	msgInternal        = "internal error"
	msgInternalDB      = "internal database error"
	msgTooManyAuth     = "Too many authentication attempts. Wait and try again"
	handshakeVersion   = "v1alpha"
	recentRevocations  = 14 * 24 * time.Hour  // LINKKEYS_REVOCATION_RECENT_DAYS default
	revocationLookBack = 180 * 24 * time.Hour // LINKKEYS_REVOCATION_FETCH_DEFAULT_DAYS default
)

// The server's algorithm lists for Handshake/handshake.
var (
	serverSigning    = []string{"ed25519"}
	serverEncryption = []string{"x25519"}
)

// snapshotKey names the snapshot cache's entries.
type snapshotKey uint8

const (
	snapDomainKeys snapshotKey = iota
	snapRevocations
)

// fixedResponses are whole response frames (prefix included) that never
// change, encoded once.
type fixedResponses struct {
	health     []byte
	ready      []byte
	notReady   []byte
	helloWorld []byte
}

// helloNull and helloEmpty are the two payloads that greet "world": the
// upstream client's {"name": null} and {}.
var (
	helloNull  = []byte{0xa1, 0x64, 'n', 'a', 'm', 'e', 0xf6}
	helloEmpty = []byte{0xa0}
)

func mustPayload(v any) []byte {
	b, err := linkkeys.EncodePayload(v)
	if err != nil {
		panic(err) // fixed values always encode
	}
	return b
}

func buildFixedResponses() fixedResponses {
	return fixedResponses{
		health:     appendOK(nil, mustPayload(linkkeys.CheckResult{Result: true})),
		ready:      appendOK(nil, mustPayload(linkkeys.CheckResult{Result: true})),
		notReady:   appendOK(nil, mustPayload(linkkeys.CheckResult{Result: false})),
		helloWorld: appendOK(nil, mustPayload(linkkeys.HelloResponse{Greeting: "Hello, world!"})),
	}
}

// appendFramed appends a length-prefixed response envelope.
func appendFramed(dst []byte, r *linkkeys.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = linkkeys.AppendResponse(dst, r)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

func appendOK(dst, payload []byte) []byte {
	return appendFramed(dst, &linkkeys.Response{Payload: payload})
}

func appendError(dst []byte, st linkkeys.Status, msg string) []byte {
	return appendFramed(dst, &linkkeys.Response{Status: st, Error: msg, HasError: true})
}

// dispatch answers one frame body and appends the response frame to dst.
// closeConn reports a response too large to send (over the 1 MiB frame
// limit): nothing is appended and the connection must close, as upstream's
// writer fails with "Response frame too large". Any answer can be too large:
// an error message quotes the request's service and op names, so an unknown
// op of about 1 MiB gets an answer of 1 MiB and a few dozen bytes.
func (s *Server) dispatch(dst, body []byte, c *conn) (out []byte, closeConn bool) {
	start := len(dst)
	out, closeConn = s.answer(dst, body, c)
	if closeConn || len(out)-start-4 > linkkeys.MaxFrameSize {
		return out[:start], true
	}
	return out, false
}

// answer appends the response frame to one frame body (the upstream order:
// depth pre-scan of the frame, envelope decode, depth pre-scan of the
// payload, API-key attempt limiter when auth is present, then the op).
// closeConn reports a cached response too large to send.
func (s *Server) answer(dst, body []byte, c *conn) (out []byte, closeConn bool) {
	start := len(dst)
	defer func() {
		if r := recover(); r != nil {
			s.logger.Error("linkkeysserver: dispatch panicked", "peer", c.peer, "panic", fmt.Sprint(r))
			out, closeConn = appendError(dst[:start], linkkeys.StatusInternal, msgInternal), false
		}
	}()
	if err := linkkeys.CheckDepth(body, linkkeys.MaxDepth); err != nil {
		return appendError(dst, linkkeys.StatusMalformedEnvelope, msgExcessiveDepth), false
	}
	req, err := decodeRequest(body)
	if err != nil {
		if err == errDecodePanic {
			return appendError(dst, linkkeys.StatusMalformedEnvelope, msgMalformed), false
		}
		return appendError(dst, linkkeys.StatusMalformedEnvelope, "Invalid request envelope: "+err.Error()), false
	}
	if err := linkkeys.CheckDepth(req.Payload, linkkeys.MaxDepth); err != nil {
		return appendError(dst, linkkeys.StatusMalformedEnvelope, msgExcessiveDepth), false
	}
	if req.Auth != nil && !s.auth.Check(c.authAttemptKey()).Allowed() {
		return appendError(dst, linkkeys.StatusForbidden, msgTooManyAuth), false
	}
	switch req.Service {
	case "DomainKeys":
		switch req.Op {
		case "get-domain-keys":
			// The payload is never decoded: {} and an empty payload both work.
			if d := s.pr.Check(c.publicReadKey()); !d.Allowed() {
				return s.rateLimited(dst, d, c), false
			}
			return s.appendSnapshot(dst, snapDomainKeys, s.loadKeys)
		case "get-revocations":
			if d := s.pr.Check(c.publicReadKey()); !d.Allowed() {
				return s.rateLimited(dst, d, c), false
			}
			var r linkkeys.GetRevocationsRequest
			if err := linkkeys.DecodePayload(req.Payload, &r); err != nil {
				return appendError(dst, linkkeys.StatusMalformedEnvelope, "Invalid payload: "+err.Error()), false
			}
			if r.Since == nil {
				return s.appendSnapshot(dst, snapRevocations, s.loadRevs)
			}
			since, err := time.Parse(time.RFC3339, *r.Since)
			if err != nil {
				return appendError(dst, linkkeys.StatusMalformedEnvelope, fmt.Sprintf("Invalid payload: since %q is not an RFC 3339 time", *r.Since)), false
			}
			frame, err := s.encodeRevocations(since)
			if err != nil {
				s.logger.Error("linkkeysserver: get-revocations failed", "err", err)
				return appendError(dst, linkkeys.StatusInternal, msgInternalDB), false
			}
			return appendFrame(dst, frame)
		}
	case "Hello":
		if req.Op == "hello" {
			return s.hello(dst, req.Payload), false
		}
	case "Ops":
		switch req.Op {
		case "healthcheck":
			return append(dst, s.fixed.health...), false
		case "readiness":
			if s.closing.Load() {
				return append(dst, s.fixed.notReady...), false
			}
			return append(dst, s.fixed.ready...), false
		}
	case "Handshake":
		if req.Op == "handshake" {
			return s.handshakeOp(dst, req.Payload), false
		}
	}
	return appendError(dst, linkkeys.StatusUnknownServiceOrOp, linkkeys.UnknownOpMessage(req.Service, req.Op)), false
}

// appendFrame appends a whole response frame unless it is too large to
// send, in which case the connection must close.
func appendFrame(dst, frame []byte) ([]byte, bool) {
	if len(frame)-4 > linkkeys.MaxFrameSize {
		return dst, true
	}
	return append(dst, frame...), false
}

var errDecodePanic = fmt.Errorf("linkkeysserver: envelope decoder panicked")

// decodeRequest decodes the envelope, turning a decoder panic into an error
// (upstream decodes inside catch_unwind).
func decodeRequest(body []byte) (req linkkeys.Request, err error) {
	defer func() {
		if recover() != nil {
			err = errDecodePanic
		}
	}()
	return linkkeys.DecodeRequest(body)
}

func (s *Server) rateLimited(dst []byte, d admit.Decision, c *conn) []byte {
	s.m.rateLimited.Add(1)
	if c.src != 0 {
		s.srcs.at(c.src).rateLimited.Add(1)
	}
	return appendError(dst, linkkeys.StatusUnavailable, linkkeys.RateLimitedMessage(d.RetryAfterSecs))
}

func (s *Server) hello(dst, payload []byte) []byte {
	if bytes.Equal(payload, helloNull) || bytes.Equal(payload, helloEmpty) {
		return append(dst, s.fixed.helloWorld...)
	}
	var r linkkeys.HelloRequest
	if err := linkkeys.DecodePayload(payload, &r); err != nil {
		return appendError(dst, linkkeys.StatusMalformedEnvelope, "Invalid payload: "+err.Error())
	}
	name := "world"
	if r.Name != nil {
		name = *r.Name
	}
	return appendOK(dst, mustPayload(linkkeys.HelloResponse{Greeting: "Hello, " + name + "!"}))
}

// handshakeOp answers Handshake/handshake: version v1alpha, the signing
// algorithms both sides support, and the encryption algorithms both support
// (the server's whole list when the caller names none), in the server's
// order.
func (s *Server) handshakeOp(dst, payload []byte) []byte {
	var r linkkeys.HandshakeRequest
	if err := linkkeys.DecodePayload(payload, &r); err != nil {
		return appendError(dst, linkkeys.StatusMalformedEnvelope, "Invalid payload: "+err.Error())
	}
	resp := linkkeys.HandshakeResponse{Version: handshakeVersion}
	resp.Algorithms.Signing = intersect(serverSigning, r.Algorithms.Signing)
	if len(r.Algorithms.Encryption) == 0 {
		resp.Algorithms.Encryption = append([]string(nil), serverEncryption...)
	} else {
		resp.Algorithms.Encryption = intersect(serverEncryption, r.Algorithms.Encryption)
	}
	return appendOK(dst, mustPayload(resp))
}

func intersect(server, client []string) []string {
	out := []string{}
	for _, a := range server {
		for _, b := range client {
			if a == b {
				out = append(out, a)
				break
			}
		}
	}
	return out
}

// appendSnapshot serves a cached, fully encoded response frame, loading it
// through the snapshot cache on a miss.
func (s *Server) appendSnapshot(dst []byte, key snapshotKey, load Loader) ([]byte, bool) {
	frame, found, err := s.cache.GetOrLoad(key, load)
	if err != nil || !found {
		if err != nil {
			s.logger.Error("linkkeysserver: loading snapshot failed", "err", err)
		}
		return appendError(dst, linkkeys.StatusInternal, msgInternalDB), false
	}
	return appendFrame(dst, frame)
}

func (s *Server) storeContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.cfg.IOTimeout)
}

// loadDomainKeysSnapshot builds the whole get-domain-keys response frame:
// the active keys, the domain and recent_revocations_available.
func (s *Server) loadDomainKeysSnapshot() ([]byte, bool, error) {
	resp := linkkeys.GetDomainKeysResponse{Keys: []linkkeys.DomainPublicKey{}, Domain: s.cfg.Domain}
	recent := false
	if s.Keys != nil {
		ctx, cancel := s.storeContext()
		defer cancel()
		keys, err := s.Keys.ActiveDomainKeys(ctx)
		if err != nil {
			return nil, false, err
		}
		if keys != nil {
			resp.Keys = keys
		}
		if recent, err = s.Keys.HasRevocationsSince(ctx, time.Now().Add(-recentRevocations)); err != nil {
			return nil, false, err
		}
	}
	resp.RecentRevocationsAvailable = &recent
	payload, err := linkkeys.EncodePayload(resp)
	if err != nil {
		return nil, false, err
	}
	return appendOK(make([]byte, 0, len(payload)+32), payload), true, nil
}

func (s *Server) loadRevocationsSnapshot() ([]byte, bool, error) {
	frame, err := s.encodeRevocations(time.Now().Add(-revocationLookBack))
	return frame, err == nil, err
}

func (s *Server) encodeRevocations(since time.Time) ([]byte, error) {
	resp := linkkeys.GetRevocationsResponse{Revocations: []linkkeys.Revocation{}}
	if s.Keys != nil {
		ctx, cancel := s.storeContext()
		defer cancel()
		revs, err := s.Keys.RevocationsSince(ctx, since)
		if err != nil {
			return nil, err
		}
		if revs != nil {
			resp.Revocations = revs
		}
	}
	payload, err := linkkeys.EncodePayload(resp)
	if err != nil {
		return nil, err
	}
	return appendOK(make([]byte, 0, len(payload)+32), payload), nil
}

// authAttemptLimits approximates the upstream API-key attempt limiter
// (docs/protocol-linkkeys.md, Checks before dispatch) with the three-layer
// limiter: a bucket of 10 refilled at 2 per second per peer address (not
// prefix-normalised: /128), a global bucket of 100 at 20 per second, and at most 4096 sources tracked per minute (further
// sources share an overflow bucket of the global size).
func authAttemptLimits() admit.LimiterConfig {
	return admit.LimiterConfig{
		RatePerMinute:           120,
		Burst:                   10,
		GlobalRatePerSecond:     20,
		GlobalBurst:             100,
		OverflowRatePerSecond:   20,
		OverflowBurst:           100,
		DistinctSourceThreshold: 4096,
		Window:                  time.Minute,
		IPv6Prefix:              128,
	}
}
