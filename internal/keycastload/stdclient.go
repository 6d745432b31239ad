package keycastload

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"sync/atomic"
	"time"

	"github.com/loadproof/loadproof/internal/httpwire"
	"github.com/loadproof/loadproof/internal/keycast"
)

// stdClient runs the load over net/http (`--http-client std`): one http.Client whose keep-alive
// pool holds as many connections as the run has workers. It sends what the fast client sends
// (the same head fields, each user's own cookies, the same body) over HTTP/1.1 only, with no
// proxy and no compression, and hands back the status and at most maxBody bytes of the body
// for the same classification. net/http skips interim (1xx) responses, and retries a POST only
// when not a byte of it was written, the fast client's rule too.
type stdClient struct {
	hc      *http.Client
	tr      *http.Transport
	url     string
	timeout time.Duration
	// ctx ends every request in flight when the run is cut off.
	ctx    context.Context
	cancel context.CancelFunc
}

func newStdClient(t *target, pool int, timeout time.Duration) *stdClient {
	d := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		Proxy:               nil, // the fast client goes straight to the target; so does this one
		DialContext:         d.DialContext,
		MaxIdleConns:        pool,
		MaxIdleConnsPerHost: pool,
		IdleConnTimeout:     idleTimeout,
		DisableCompression:  true,
		// HTTP/1.1 only, as the fast client: a non-nil empty map turns HTTP/2 off.
		TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{},
	}
	if t.tls != nil {
		tr.TLSClientConfig = t.tls.Clone()
		tr.TLSHandshakeTimeout = timeout
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &stdClient{
		hc: &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		tr: tr, url: t.base + keycast.PathNostr, timeout: timeout, ctx: ctx, cancel: cancel,
	}
}

var (
	hvUserAgent = []string{userAgent}
	hvJSON      = []string{"application/json"}
)

// exchange sends body as user u through net/http and reads the response.
func (s *stdClient) exchange(_ context.Context, wk *worker, u *userClient, body []byte, start time.Time) (httpwire.Response, time.Time, error) {
	resp, err := s.do(wk, u, body, start)
	return resp, time.Now(), err
}

// do is exchange without the end time.
func (s *stdClient) do(wk *worker, u *userClient, body []byte, start time.Time) (httpwire.Response, error) {
	ctx, cancel := context.WithDeadline(s.ctx, start.Add(s.timeout))
	defer cancel()
	// A request that never got a connection was never sent: a connect failure, as in the fast
	// client, not a request.
	var gotConn atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { gotConn.Store(true) }})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return httpwire.Response{}, err
	}
	req.Header = http.Header{"User-Agent": hvUserAgent, "Content-Type": hvJSON}
	if u.token != "" {
		req.Header["Authorization"] = []string{"Bearer " + u.token}
	}
	if line := u.line.Load(); line != nil {
		req.Header["Cookie"] = []string{strings.TrimSuffix(strings.TrimPrefix(string(*line), "Cookie: "), "\r\n")}
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		if !gotConn.Load() {
			return httpwire.Response{}, &connectError{err}
		}
		return httpwire.Response{}, err
	}
	defer resp.Body.Close()
	for _, v := range resp.Header["Set-Cookie"] {
		u.setCookie([]byte(v))
	}
	out := httpwire.Response{Status: resp.StatusCode, Close: resp.Close, Body: wk.resp[:0]}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return out, nil // the body is the connection itself
	}
	out.Body, err = readAtMost(resp.Body, out.Body, maxBody)
	if cap(out.Body) > cap(wk.resp) {
		wk.resp = out.Body[:0]
	}
	return out, err
}

// readAtMost reads r to its end, keeping at most limit bytes after dst's.
func readAtMost(r io.Reader, dst []byte, limit int) ([]byte, error) {
	for len(dst) < limit {
		if cap(dst) == len(dst) {
			dst = append(dst, 0)[:len(dst)]
		}
		n, err := r.Read(dst[len(dst):min(cap(dst), limit)])
		dst = dst[:len(dst)+n]
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
	_, err := io.Copy(io.Discard, r) // the rest is dropped so the connection can be reused
	return dst, err
}

func (s *stdClient) cutOff() { s.cancel() }

func (s *stdClient) closeIdle() { s.tr.CloseIdleConnections() }

// malformedStd reports whether a net/http error is a malformed response. net/http reports them
// with unexported types (badStringError, unsupportedTEError, the chunked reader's errors), so
// they are known by their texts (net/http/response.go, transfer.go, internal/chunked.go);
// TestResponseParsingBothClients pins them to the Go version in use.
func malformedStd(err error) bool {
	var pe textproto.ProtocolError
	if errors.As(err, &pe) {
		return true
	}
	msg := err.Error()
	for _, s := range []string{
		"malformed HTTP", "malformed chunked encoding", "chunked line", "chunk length",
		"Content-Length", "transfer encoding", "bad trailer key", "suspiciously long trailer",
		"non-data", "header line too long", "response headers exceeded",
	} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
