package keycastserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/loadproof/loadproof/internal/admit"
	"github.com/loadproof/loadproof/internal/httpwire"
	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/keycaststore"
)

// rpcCall is a decoded /api/nostr body.
type rpcCall struct {
	method string
	idx    int // index into rpcMethodLabels
	params []json.RawMessage
}

// getPublicKeyBody is the exact body the load tool sends for get-public-key; it is matched
// byte for byte and skips JSON decoding.
var getPublicKeyBody = []byte(`{"method":"get_public_key","params":[]}`)

func methodIndex(m string) int {
	for i, name := range rpcMethodLabels[:mUnknown] {
		if m == name {
			return i
		}
	}
	return mUnknown
}

// parseRPC decodes {"method": string, "params": [json…]}; params may be absent or null (= []).
// Errors carry axum's statuses: 400 for a syntax error, 422 for the wrong shape.
func parseRPC(b []byte) (rpcCall, error) {
	if bytes.Equal(b, getPublicKeyBody) {
		return rpcCall{method: keycast.RPCGetPublicKey, idx: mGetPublicKey}, nil
	}
	c, err := parseRPCJSON(b)
	if err == nil && bytes.IndexByte(b, '\\') >= 0 {
		if p := surrogateProblem(b); p != "" {
			return rpcCall{}, &bodyError{http.StatusBadRequest, "Failed to parse the request body as JSON: " + p}
		}
	}
	return c, err
}

// parseRPCJSON is parseRPC for bodies other than the get-public-key one.
func parseRPCJSON(b []byte) (rpcCall, error) {
	if c, ok := fastRPC(b); ok {
		return c, nil
	}
	var wire struct {
		Method *string           `json:"method"`
		Params []json.RawMessage `json:"params"`
	}
	if !json.Valid(b) {
		return rpcCall{}, &bodyError{http.StatusBadRequest, "Failed to parse the request body as JSON: " + jsonErr(json.Unmarshal(b, new(any)))}
	}
	t := bytes.TrimSpace(b)
	if len(t) == 0 || t[0] != '{' {
		return rpcCall{}, &bodyError{http.StatusUnprocessableEntity, "Failed to deserialize the JSON body into the target type: expected a JSON object"}
	}
	if err := json.Unmarshal(b, &wire); err != nil {
		return rpcCall{}, &bodyError{http.StatusUnprocessableEntity, "Failed to deserialize the JSON body into the target type: " + jsonErr(err)}
	}
	if wire.Method == nil {
		return rpcCall{}, &bodyError{http.StatusUnprocessableEntity, "Failed to deserialize the JSON body into the target type: missing field `method`"}
	}
	return rpcCall{method: *wire.Method, idx: methodIndex(*wire.Method), params: wire.Params}, nil
}

// rpcErr is an /api/nostr failure: status, message (the {"error"} text) and histogram outcome.
type rpcErr struct {
	status  int
	msg     string
	outcome int
}

func (e *rpcErr) Error() string { return e.msg }

var (
	errMissingToken = &rpcErr{http.StatusUnauthorized, keycast.MsgAuthRequired, oAuthError}
	errInvalidToken = &rpcErr{http.StatusUnauthorized, keycast.MsgInvalidToken, oAuthError}
	errPolicyDenied = &rpcErr{http.StatusForbidden, keycast.MsgPolicyDenied, oClientError}
	// errRejected marks admission rejection (503 admission_rejected); errRateLimited a 429.
	errRejected = errors.New("keycastserver: admission rejected")
)

func badParams(msg string) *rpcErr { return &rpcErr{http.StatusBadRequest, msg, oClientError} }

// rpcOut is an /api/nostr answer, independent of the transport that writes it.
type rpcOut struct {
	status     int
	text       bool   // text/plain (axum-style rejection, body ends in "\n"); else application/json
	body       []byte // may alias the caller's scratch buffer or a handler's precomputed answer
	retryAfter string // Retry-After value, "" for none; set with Cache-Control: no-store
	// heavy marks answers that took CPU-heavy work (signing, encryption); the fast path lets
	// other ready connections run before writing them (see serveFastConn).
	heavy bool
}

func textOut(status int, msg string) rpcOut {
	return rpcOut{status: status, text: true, body: []byte(msg + "\n")}
}

var (
	outNeedJSON  = textOut(http.StatusUnsupportedMediaType, "Expected request with `Content-Type: application/json`")
	outAdmission = rpcOut{status: http.StatusServiceUnavailable, body: admissionBody, retryAfter: "1"}
)

// serveNostr is POST /api/nostr through net/http. The HTTP/1.1 fast path (fastpath.go) answers
// most requests without net/http; both go through nostr.
func (s *Server) serveNostr(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if !jsonContentType(r) {
		writeOut(w, outNeedJSON)
		return
	}
	bp, err := readBody(r, s.cfg.BodyLimit)
	if err != nil {
		var be *bodyError
		if errors.As(err, &be) {
			writeOut(w, textOut(be.status, be.msg))
		} else {
			writeOut(w, textOut(http.StatusBadRequest, err.Error()))
		}
		return
	}
	defer putBody(bp)
	var authz string
	if a := r.Header["Authorization"]; len(a) > 0 {
		authz = a[0]
	}
	scratch := bodyPool.Get().(*[]byte)
	out := s.nostr(r.Context(), authz, r.Host, *bp, start, (*scratch)[:0], nil)
	writeOut(w, out)
	putBody(scratch)
}

// writeOut writes an rpcOut through net/http.
func writeOut(w http.ResponseWriter, out rpcOut) {
	h := w.Header()
	if out.text {
		h["Content-Type"] = hvText
		h["X-Content-Type-Options"] = hvNosniff
	} else {
		h["Content-Type"] = hvJSON
	}
	if out.retryAfter != "" {
		if out.retryAfter == "1" {
			h["Retry-After"] = hvRetryOne
		} else {
			h["Retry-After"] = []string{out.retryAfter}
		}
		h["Cache-Control"] = hvNoStore
	}
	w.WriteHeader(out.status)
	w.Write(out.body)
}

// nostr answers one /api/nostr request whose Content-Type was accepted: decode, count,
// authenticate through the handler cache, run the method. Dynamic answers are appended to
// scratch.
func (s *Server) nostr(ctx context.Context, authz, host string, body []byte, start time.Time, scratch []byte, memo *tokenMemo) rpcOut {
	call, err := parseRPC(body)
	if err != nil {
		var be *bodyError
		errors.As(err, &be)
		return textOut(be.status, be.msg)
	}
	if _, err := tenantDomain(host); err != nil {
		return textOut(http.StatusBadRequest, err.Error())
	}
	s.m.rpcRequests.Add(1)
	out, outcome := s.rpc(ctx, authz, &call, start, scratch, memo)
	s.m.opDuration[call.idx][outcome].Observe(time.Since(start).Seconds())
	return out
}

// rpc runs one call; it returns the answer and the histogram outcome.
func (s *Server) rpc(ctx context.Context, authz string, call *rpcCall, start time.Time, scratch []byte, memo *tokenMemo) (rpcOut, int) {
	if authz == "" {
		s.m.rpcAuthErrors.Add(1)
		return s.fail(errMissingToken, scratch)
	}
	h, err := s.handlerFor(ctx, authz, start, memo)
	if err != nil {
		// Upstream counts every handler-load failure as an auth error; shedding and timeouts are
		// not authentication failures, so they are counted by their own admission metrics only.
		if !errors.Is(err, errRejected) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			s.m.rpcAuthErrors.Add(1)
		}
		return s.fail(err, scratch)
	}
	if h.rate != nil {
		h.rateMu.Lock()
		ok, retry := h.rate.TryConsume(time.Duration(start.UnixNano()))
		h.rateMu.Unlock()
		if !ok {
			s.m.rateLimited.Inc()
			ra := strconv.FormatUint(retry, 10)
			msg := "Too many requests for this authorization; retry after " + ra + "s"
			return rpcOut{status: http.StatusTooManyRequests, body: keycast.AppendErrorJSON(scratch, msg, keycast.CodeRateLimited), retryAfter: ra}, oRateLimited
		}
	}
	var result []byte
	switch call.idx {
	case mGetPublicKey:
		s.m.rpcSuccess.Add(1)
		return rpcOut{status: http.StatusOK, body: h.pubkeyResult}, oSuccess
	case mSignEvent:
		result, err = s.signEvent(ctx, h, call.params, scratch, start)
	case mNIP44Encrypt, mNIP44Decrypt, mNIP04Encrypt, mNIP04Decrypt:
		result, err = s.crypt(ctx, h, call.idx, call.params, scratch, start)
	default:
		return s.fail(badParams(keycast.MsgUnsupportedMethod+call.method), scratch)
	}
	if err != nil {
		out, outcome := s.fail(err, scratch)
		out.heavy = true
		return out, outcome
	}
	s.m.rpcSuccess.Add(1)
	return rpcOut{status: http.StatusOK, body: result, heavy: true}, oSuccess
}

// fail turns an RPC error into its answer and outcome.
func (s *Server) fail(err error, scratch []byte) (rpcOut, int) {
	var re *rpcErr
	switch {
	case errors.Is(err, errRejected):
		return outAdmission, oAdmissionRejected
	case errors.As(err, &re):
		return rpcOut{status: re.status, body: keycast.AppendErrorJSON(scratch, re.msg, "")}, re.outcome
	case errors.Is(err, context.DeadlineExceeded):
		return rpcOut{status: http.StatusGatewayTimeout, body: keycast.AppendErrorJSON(scratch, s.timeoutMsg(), "")}, oTimeout
	case errors.Is(err, context.Canceled):
		// The client went away; nobody reads this answer.
		return rpcOut{status: http.StatusServiceUnavailable, body: keycast.AppendErrorJSON(scratch, "request cancelled", "")}, oUnavailable
	default:
		s.log.Error("rpc failed", "err", err)
		return rpcOut{status: http.StatusInternalServerError, body: keycast.AppendErrorJSON(scratch, err.Error(), "")}, oServerError
	}
}

func (s *Server) timeoutMsg() string {
	if s.cfg.HandlerTimeout == DefaultHandlerTimeout {
		return keycast.MsgRPCTimeout
	}
	return "RPC request timed out after " + s.cfg.HandlerTimeout.String()
}

// handlerFor returns the cached handler of a bearer token, loading it on a miss.
// tokenMemo remembers the last Authorization value of a connection and its cache key: clients
// send the same token on a connection again and again, and comparing 600 bytes is cheaper than
// hashing them.
type tokenMemo struct {
	authz []byte
	key   tokenKey
}

func (s *Server) handlerFor(ctx context.Context, authz string, start time.Time, memo *tokenMemo) (*rpcHandler, error) {
	if len(authz) <= len("Bearer ") || authz[:len("Bearer ")] != "Bearer " {
		return nil, errInvalidToken
	}
	var key tokenKey
	if memo != nil && len(memo.authz) > 0 && string(memo.authz) == authz {
		key = memo.key
	} else {
		tok := authz[len("Bearer "):]
		// Hash the token's bytes in place: sha256 keeps no reference, so no copy is needed.
		key = tokenKey(sha256.Sum256(unsafe.Slice(unsafe.StringData(tok), len(tok))))
		if memo != nil {
			memo.authz = append(memo.authz[:0], authz...)
			memo.key = key
		}
	}
	now := s.cfg.Now()
	h, st := s.cache.get(key, now.UnixNano())
	switch st {
	case cacheHit:
		s.m.rpcHits.Add(1)
		return h, nil
	case cacheInvalid:
		return nil, errInvalidToken
	}
	s.m.rpcMisses.Add(1)
	s.m.handlerLoads.Inc()
	// The fast path's authz aliases its read buffer; the slow path may keep pieces of it.
	authz = strings.Clone(authz)
	// Concurrent misses for one token coalesce into one load: a burst of first requests from one
	// user costs one token verification and one CPU slot, not one each (which would shed them).
	v, err, _ := s.loads.Do(string(key[:]), func() (any, error) {
		return s.loadHandler(ctx, authz, key, now, start)
	})
	if err != nil {
		s.m.handlerLoadFailures.Inc()
		return nil, err
	}
	return v.(*rpcHandler), nil
}

// loadHandler is the cache-miss path: full UCAN validation, the authorization and key from the
// database, decryption, policy rules, validity, then caching.
func (s *Server) loadHandler(ctx context.Context, authz string, key tokenKey, now, start time.Time) (*rpcHandler, error) {
	ctx, cancel := context.WithDeadline(ctx, start.Add(s.cfg.HandlerTimeout))
	defer cancel()
	release, err := s.acquireCPU(ctx, start.Add(s.cfg.HandlerTimeout))
	if err != nil {
		return nil, err
	}
	u, err := keycast.ValidateBearer(authz, keycast.ValidateOptions{Now: now, ServerPubkey: s.serverPub})
	release()
	if err != nil {
		s.log.Debug("rpc token refused", "err", err)
		return nil, errInvalidToken
	}
	if u.Facts.BunkerPubkey == "" {
		return nil, errInvalidToken
	}
	row, err := s.store.LoadHandler(ctx, u.Facts.BunkerPubkey)
	switch {
	case errors.Is(err, keycaststore.ErrNotFound):
		return nil, errInvalidToken
	case err != nil:
		return nil, s.dbErr(ctx, err)
	}
	a := &row.Authorization
	userHex := u.Audience.Hex()
	if a.UserPubkey != userHex || !a.Valid(now) {
		return nil, errInvalidToken
	}
	if len(row.EncryptedSecretKey) == 0 {
		return nil, &rpcErr{http.StatusInternalServerError, "Personal keys not found", oServerError}
	}
	plain, err := keycast.OpenWith(s.aead, row.EncryptedSecretKey)
	if err != nil || len(plain) != 32 {
		return nil, &rpcErr{http.StatusInternalServerError, "Decryption failed: the personal key does not open with this server's master key", oServerError}
	}
	signer, err := keycast.NewSignerChecked(keycast.SecretKey(plain))
	clear(plain)
	if err != nil || signer.Public() != u.Audience {
		return nil, &rpcErr{http.StatusInternalServerError, "Decryption failed: the personal key does not belong to the user", oServerError}
	}
	var rules []keycast.Permission
	if a.PolicyID != 0 {
		if p, ok := s.policiesByID[a.PolicyID]; ok {
			rules = p.rules
		} else {
			rules = parseRules(row.Permissions)
		}
	}
	h := &rpcHandler{
		key:        key,
		auth:       &authState{id: a.ID},
		signer:     signer,
		userPub:    u.Audience,
		userPubHex: userHex,
		perms:      rules,
		tokenExp:   u.Exp,
	}
	if !a.ExpiresAt.IsZero() {
		h.auth.expiresAt = a.ExpiresAt.UnixNano()
	}
	h.pubkeyResult = append(append([]byte(`{"result":"`), userHex...), `"}`...)
	if s.cfg.RPCRatePerSecond > 0 {
		b := admit.NewBucket(s.cfg.RPCBurst, s.cfg.RPCRatePerSecond, time.Duration(start.UnixNano()))
		h.rate = &b
	}
	if !s.cache.put(h, now.UnixNano()) {
		return nil, errInvalidToken // revoked while loading
	}
	return h, nil
}

// dbErr maps a database failure: past the handler deadline it is a timeout (504), otherwise
// 503 "Database temporarily unavailable" (never 500, never the admission code).
func (s *Server) dbErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	s.log.Error("database error on the rpc path", "err", err)
	return &rpcErr{http.StatusServiceUnavailable, keycast.MsgDatabaseUnavailable, oUnavailable}
}

// doneCtx is already cancelled: Acquire with it takes a free slot or fails at once.
var doneCtx = func() context.Context {
	c, cancel := context.WithCancel(context.Background())
	cancel()
	return c
}()

// acquireCPU takes a CPU slot for heavy work. A free slot costs no allocation. Otherwise it
// waits at most QueueTimeout and never past deadline (zero: none) or ctx: a full queue or an
// expired queue wait is errRejected (503 admission_rejected), reaching deadline first is
// context.DeadlineExceeded (504), ctx's end is ctx's error.
func (s *Server) acquireCPU(ctx context.Context, deadline time.Time) (func(), error) {
	release, err := s.gate.Acquire(doneCtx)
	if err == nil {
		return release, nil
	}
	if errors.Is(err, admit.ErrGateFull) {
		s.m.rejectQueueFull.Inc()
		return nil, errRejected
	}
	qd := time.Now().Add(s.cfg.QueueTimeout)
	handlerFirst := !deadline.IsZero() && deadline.Before(qd)
	if handlerFirst {
		qd = deadline
	}
	qctx, cancel := context.WithDeadline(ctx, qd)
	release, err = s.gate.Acquire(qctx)
	cancel()
	switch {
	case err == nil:
		return release, nil
	case errors.Is(err, admit.ErrGateFull):
		s.m.rejectQueueFull.Inc()
		return nil, errRejected
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case handlerFirst:
		return nil, context.DeadlineExceeded
	default:
		s.m.rejectQueueTimeout.Inc()
		return nil, errRejected
	}
}

// signEvent: [event] (object or JSON string) → the signed event.
func (s *Server) signEvent(ctx context.Context, h *rpcHandler, params []json.RawMessage, dst []byte, start time.Time) ([]byte, error) {
	if len(params) == 0 || isNull(params[0]) {
		return nil, badParams(keycast.MsgMissingEvent)
	}
	ev, err := parseEventFor(params[0], h.userPubHex)
	if err != nil {
		return nil, badParams(err.Error())
	}
	if !keycast.AllowSign(h.perms, ev.Kind, ev.Content) {
		return nil, errPolicyDenied
	}
	release, err := s.acquireCPU(ctx, start.Add(s.cfg.HandlerTimeout))
	if err != nil {
		return nil, err
	}
	signed, err := keycast.SignEvent(h.signer, ev)
	release()
	if err != nil {
		return nil, badParams(err.Error())
	}
	dst = append(dst, `{"result":`...)
	dst = signed.AppendJSON(dst)
	return append(dst, '}'), nil
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// stringParam returns params[i] when it is a JSON string: a plain one read in place, any other
// decoded by encoding/json (httpwire.String).
func stringParam(params []json.RawMessage, i int) (string, bool) {
	if i >= len(params) {
		return "", false
	}
	raw := params[i]
	s, end, ok := httpwire.String(raw, httpwire.SkipWS(raw, 0))
	if !ok || httpwire.SkipWS(raw, end) != len(raw) {
		return "", false
	}
	return s, true
}

// crypt runs nip44_encrypt/decrypt and nip04_encrypt/decrypt: [peer_pubkey_hex, text].
func (s *Server) crypt(ctx context.Context, h *rpcHandler, idx int, params []json.RawMessage, dst []byte, start time.Time) ([]byte, error) {
	encrypt := idx == mNIP44Encrypt || idx == mNIP04Encrypt
	peerHex, ok := stringParam(params, 0)
	if !ok {
		if encrypt {
			return nil, badParams(keycast.MsgMissingRecipient)
		}
		return nil, badParams(keycast.MsgMissingSender)
	}
	text, ok := stringParam(params, 1)
	if !ok {
		if encrypt {
			return nil, badParams(keycast.MsgMissingPlaintext)
		}
		return nil, badParams(keycast.MsgMissingCiphertext)
	}
	peer, err := keycast.ParsePublicKey(peerHex)
	if err != nil {
		return nil, badParams(keycast.MsgInvalidPubkey + trimPrefix(err.Error()))
	}
	if encrypt && !keycast.AllowEncrypt(h.perms, text, h.userPub, peer) {
		return nil, errPolicyDenied
	}
	if !encrypt && !keycast.AllowDecrypt(h.perms, text, peer, h.userPub) {
		return nil, errPolicyDenied
	}
	release, err := s.acquireCPU(ctx, start.Add(s.cfg.HandlerTimeout))
	if err != nil {
		return nil, err
	}
	out, err := cryptOp(h.signer.SecretKey(), peer, idx, text)
	release()
	if err != nil {
		return nil, badParams(err.Error())
	}
	dst = append(dst, `{"result":`...)
	dst = keycast.AppendJSONString(dst, out)
	return append(dst, '}'), nil
}

func cryptOp(sk keycast.SecretKey, peer keycast.PublicKey, idx int, text string) (string, error) {
	switch idx {
	case mNIP44Encrypt, mNIP44Decrypt:
		ck, err := keycast.NIP44ConversationKey(sk, peer)
		if err != nil {
			return "", err
		}
		if idx == mNIP44Encrypt {
			return keycast.NIP44Encrypt(text, ck, nil)
		}
		return keycast.NIP44Decrypt(text, ck)
	case mNIP04Encrypt:
		return keycast.NIP04Encrypt(sk, peer, text)
	case mNIP04Decrypt:
		return keycast.NIP04Decrypt(sk, peer, text)
	}
	return "", fmt.Errorf("keycastserver: method index %d is not an encryption method", idx)
}

// trimPrefix drops the "keycast: " package prefix from an error text sent on the wire.
func trimPrefix(s string) string {
	const p = "keycast: "
	if len(s) > len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}
