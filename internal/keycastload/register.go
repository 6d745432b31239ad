package keycastload

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/loadproof/loadproof/internal/engine"
	"github.com/loadproof/loadproof/internal/textclip"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/loadproof/loadproof/internal/keycast"
)

// registrationTimeout is upstream's RegistrationClient timeout.
const registrationTimeout = 60 * time.Second

// StepError is a failed step of the registration flow (register → authorize → token).
type StepError struct {
	Step   string // "register", "authorize" or "token"
	Status int    // HTTP status; 0 when no response came back
	Body   []byte // the response body (bounded), when there was one
	Err    error  // the transport error or the client-side failure
}

func (e *StepError) Error() string {
	switch {
	case e.Status != 0 && e.Err != nil:
		return fmt.Sprintf("keycastload: %s: %v", e.Step, e.Err)
	case e.Status != 0:
		return fmt.Sprintf("keycastload: %s answered HTTP %d: %s", e.Step, e.Status, textclip.Bytes(bytes.TrimSpace(e.Body), 200))
	}
	return fmt.Sprintf("keycastload: %s: %v", e.Step, e.Err)
}

func (e *StepError) Unwrap() error { return e.Err }

// Cause is the failure's short cause, for summaries ("register: HTTP 409", "token: network_eof").
func (e *StepError) Cause() string {
	switch {
	case e.Status != 0 && e.Err != nil:
		return e.Step + ": " + e.Err.Error()
	case e.Status != 0:
		return fmt.Sprintf("%s: HTTP %d", e.Step, e.Status)
	}
	return e.Step + ": " + NetworkCause(e.Err)
}

// class buckets a failed registration for the run's register method.
func (e *StepError) class() (Class, string) {
	if e.Status == 0 {
		return Network, NetworkCause(e.Err)
	}
	if e.Status >= 200 && e.Status < 300 {
		return Other, "register_flow_" + e.Step
	}
	cl, cause := Classify(e.Status, e.Body)
	return cl, cause
}

// newRegistrationClient is one HTTP client for the registration flow. Cookies are not kept in a
// jar: the session cookie is passed explicitly, so concurrent registrations on a shared client
// never see each other's sessions.
// tc is the TLS configuration (TLSOptions.clientConfig; nil: net/http's defaults).
func newRegistrationClient(pool int, timeout time.Duration, tc *tls.Config) *http.Client {
	return &http.Client{
		Timeout:       timeout,
		Transport:     httpTransport(tc, pool),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// RegisteredUser is the outcome of one registration flow.
type RegisteredUser struct {
	Pubkey      string
	AccessToken string
}

// RegisterUser runs upstream's full flow against base (docs/protocol-keycast.md, Register,
// Authorize, Token exchange): register with an
// Origin header, take the keycast_session cookie, approve an OAuth authorization for client
// "loadtest" with scope policy:social and a PKCE S256 challenge, and exchange the code for an
// access token. A failure is a *StepError.
//
// retries > 0 sends a step again, up to retries times, when the server sheds it on purpose (503
// admission_rejected) or rate-limits it (429), after its Retry-After (1 s when absent, at most
// 5 s, with ±50% jitter): those answers mean "not now", not "no". Upstream drops such users; setup retries, the
// run's register method does not (it measures).
func RegisterUser(ctx context.Context, hc *http.Client, base, email, password string, retries int) (RegisteredUser, error) {
	post := func(url string, v any, h http.Header) (int, []byte, http.Header, error) {
		for attempt := 0; ; attempt++ {
			status, body, hdr, err := postJSON(ctx, hc, url, v, h)
			if err != nil || attempt >= retries {
				return status, body, hdr, err
			}
			if cl, _ := Classify(status, body); cl != Intentional && cl != RateLimited {
				return status, body, hdr, err
			}
			wait := time.Second
			if secs, perr := strconv.Atoi(hdr.Get("Retry-After")); perr == nil && secs >= 0 {
				wait = min(time.Duration(secs)*time.Second, 5*time.Second)
			}
			// Jitter spreads the retries of many shed registrations apart.
			wait = wait/2 + time.Duration(mrand.Int64N(int64(wait)))
			tm := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				tm.Stop()
				return status, body, hdr, err
			case <-tm.C:
			}
		}
	}
	base = strings.TrimRight(base, "/")
	origin, err := originOf(base)
	if err != nil {
		return RegisteredUser{}, &StepError{Step: "register", Err: err}
	}
	var out RegisteredUser

	// 1. register
	status, body, hdr, err := post(base+keycast.PathRegister, keycast.RegisterRequest{Email: email, Password: password},
		http.Header{"Origin": {origin}})
	if err != nil {
		return out, &StepError{Step: "register", Err: err}
	}
	if status < 200 || status > 299 {
		return out, &StepError{Step: "register", Status: status, Body: body}
	}
	var rr keycast.RegisterResponse
	if err := json.Unmarshal(body, &rr); err != nil {
		return out, &StepError{Step: "register", Status: status, Body: body, Err: errors.New(keycast.MsgParseResponse + err.Error())}
	}
	session := ""
	for _, sc := range hdr.Values("Set-Cookie") {
		if v, ok := strings.CutPrefix(sc, keycast.SessionCookieName+"="); ok {
			session, _, _ = strings.Cut(v, ";")
			break
		}
	}
	if session == "" {
		return out, &StepError{Step: "register", Status: status, Body: body, Err: errors.New(keycast.MsgNoSessionToken)}
	}
	out.Pubkey = rr.Pubkey

	// 2. authorize with PKCE S256
	verifier := keycast.NewPKCEVerifier()
	challenge := keycast.PKCEChallengeS256(verifier)
	method := keycast.PKCES256
	redirect := base + keycast.LoadtestRedirectPath
	status, body, _, err = post(base+keycast.PathAuthorize, keycast.AuthorizeRequest{
		Approved: true, ClientID: keycast.LoadtestClientID, RedirectURI: redirect, Scope: keycast.LoadtestScope,
		CodeChallenge: &challenge, CodeChallengeMethod: &method,
	}, http.Header{"Origin": {origin}, "Cookie": {keycast.SessionCookieName + "=" + session}})
	if err != nil {
		return out, &StepError{Step: "authorize", Err: err}
	}
	if status < 200 || status > 299 {
		return out, &StepError{Step: "authorize", Status: status, Body: body}
	}
	var ar keycast.AuthorizeResponse
	if err := json.Unmarshal(body, &ar); err != nil || ar.Code == "" {
		if err == nil {
			err = errors.New("no code in the response")
		}
		return out, &StepError{Step: "authorize", Status: status, Body: body, Err: errors.New(keycast.MsgParseResponse + err.Error())}
	}

	// 3. token
	grant := keycast.GrantTypeAuthorizationCode
	status, body, _, err = post(base+keycast.PathToken, keycast.TokenRequest{
		GrantType: &grant, Code: ar.Code, ClientID: keycast.LoadtestClientID, RedirectURI: redirect, CodeVerifier: &verifier,
	}, nil)
	if err != nil {
		return out, &StepError{Step: "token", Err: err}
	}
	if status < 200 || status > 299 {
		return out, &StepError{Step: "token", Status: status, Body: body,
			Err: errors.New(keycast.MsgTokenExchange + textclip.Bytes(bytes.TrimSpace(body), 200))}
	}
	var tr keycast.TokenResponse
	if err := json.Unmarshal(body, &tr); err != nil {
		return out, &StepError{Step: "token", Status: status, Body: body, Err: errors.New(keycast.MsgParseResponse + err.Error())}
	}
	if tr.AccessToken == "" {
		return out, &StepError{Step: "token", Status: status, Body: body, Err: errors.New(keycast.MsgNoAccessToken)}
	}
	out.AccessToken = tr.AccessToken
	return out, nil
}

// postJSON posts v as JSON and returns the status, the body (bounded to 64 KiB) and the headers.
func postJSON(ctx context.Context, hc *http.Client, url string, v any, h http.Header) (int, []byte, http.Header, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return 0, nil, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return 0, nil, nil, err
	}
	for k, vs := range h {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return 0, nil, nil, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, body, resp.Header, nil
}

// originOf returns scheme://host[:port] of a base URL.
func originOf(base string) (string, error) {
	t, err := parseTarget(base)
	if err != nil {
		return "", err
	}
	return t.scheme + "://" + t.host, nil
}

const alphanumerics = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// randomAlphanumeric returns n random letters and digits (crypto/rand), as upstream's passwords.
func randomAlphanumeric(n int) string {
	b := make([]byte, n)
	var r [1]byte
	for i := 0; i < n; {
		if _, err := rand.Read(r[:]); err != nil {
			panic(fmt.Sprintf("keycastload: crypto/rand failed: %v", err))
		}
		// Rejection sampling keeps the distribution uniform: 62*4 = 248.
		if r[0] < 248 {
			b[i] = alphanumerics[r[0]%62]
			i++
		}
	}
	return string(b)
}

// doRegister is the run's register method: a fresh client per request (pool 1, its own cookies,
// 60 s timeout), email lt{run_id}-{n}@bench.local, and the whole three-call flow timed as one
// request. Upstream records any failure as a synthetic 500; we classify by the step's real
// status (so a shed 503 stays intentional and a 409 stays a client error) or as a network error.
func (r *runner) doRegister(ctx context.Context, ew *engine.Worker, wk *worker, num uint64) engine.Outcome {
	hc := newRegistrationClient(1, registrationTimeout, r.httpTLS)
	defer hc.CloseIdleConnections()
	email := fmt.Sprintf("lt%s-%d@bench.local", r.runID, num)
	start := time.Now()
	_, err := RegisterUser(ctx, hc, r.cfg.URL, email, randomAlphanumeric(32), 0)
	took := time.Since(start)
	if err != nil && r.aborted.Load() {
		return r.cutOffOutcome(err, start)
	}
	if isDialError(err) {
		err = &connectError{err}
	}
	if out, ok := r.afterExchange(ew, wk, num, err, start); ok {
		return out
	}
	out := engine.Outcome{Took: took, Start: start}
	if err != nil {
		var se *StepError
		var cl Class
		if errors.As(err, &se) {
			cl, out.Cause = se.class()
		} else {
			cl, out.Cause = Network, NetworkCause(err)
		}
		out.Class = uint8(cl)
		r.logFailure(num, err.Error())
	}
	return out
}

// newRunID is upstream's run id: "{unix_ts}-{6 random alphanumerics}".
func newRunID(now time.Time) string {
	return fmt.Sprintf("%d-%s", now.Unix(), randomAlphanumeric(6))
}
