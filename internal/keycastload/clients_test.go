package keycastload

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/testwait"
)

var clients = []string{HTTPClientFast, HTTPClientStd}

// forEachClient runs a test once per HTTP client.
func forEachClient(t *testing.T, test func(t *testing.T, client string)) {
	for _, c := range clients {
		t.Run(c, func(t *testing.T) { test(t, c) })
	}
}

// rawServer answers every request on 127.0.0.1:0 with whatever serve writes. serve gets the
// connection's reader after one whole request (head and Content-Length body) has been read from
// it, and the number of that request on the connection (0, 1, …); returning false closes the
// connection. conns counts accepted connections, requests the requests read.
type rawServer struct {
	ln       net.Listener
	conns    atomic.Int64
	requests atomic.Int64
	wg       sync.WaitGroup
}

func newRawServer(t *testing.T, serve func(s *rawServer, c net.Conn, br *bufio.Reader, n int) bool) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.conns.Add(1)
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				br := bufio.NewReader(c)
				for n := 0; ; n++ {
					if serve == nil || !serve(s, c, br, n) {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		testwait.WaitGroup(t, &s.wg, testwait.Long, "the raw server's connection handlers")
	})
	return s
}

func (s *rawServer) url() string { return "http://" + s.ln.Addr().String() }

// readRequest reads one request (head and Content-Length body) from br: false when there is
// none, or when it is not a POST /api/nostr (the runs' metrics fetches get no answer).
func readRequest(br *bufio.Reader) bool {
	req, err := http.ReadRequest(br)
	if err != nil {
		return false
	}
	_, err = io.Copy(io.Discard, req.Body)
	return err == nil && req.Method == http.MethodPost && req.URL.Path == keycast.PathNostr
}

// answering is a rawServer handler that reads each request and writes raw in answer; close ends
// the connection after the answer.
func answering(raw string, close bool) func(*rawServer, net.Conn, *bufio.Reader, int) bool {
	return func(s *rawServer, c net.Conn, br *bufio.Reader, _ int) bool {
		if !readRequest(br) {
			return false
		}
		s.requests.Add(1)
		io.WriteString(c, raw)
		return !close
	}
}

// clientRun makes a runner for url with the given client, for tests that drive exchange
// themselves.
func clientRun(t *testing.T, url, client string) *runner {
	t.Helper()
	cfg := baseConfig(url, 1)
	cfg.HTTPClient, cfg.Requests, cfg.Concurrency, cfg.HTTPTimeout = client, 1, 1, 5*time.Second
	cfg, err := cfg.normalize()
	if err != nil {
		t.Fatal(err)
	}
	tg, err := parseTarget(cfg.URL)
	if err != nil {
		t.Fatal(err)
	}
	r := newRunner(cfg, tg)
	if r.httpTLS, err = r.configureTLS(); err != nil {
		t.Fatal(err)
	}
	r.hc = r.newHTTPClient()
	t.Cleanup(r.hc.closeIdle)
	return r
}

// exchangeOnce sends one get_public_key request as the runner's user and classifies it.
func (r *runner) exchangeOnce() (Class, string) {
	wk := r.newWorker(0).(*worker)
	resp, _, err := r.hc.exchange(context.Background(), wk, r.client(0), r.requestBody(wk, 0), time.Now())
	return outcomeOf(resp, err)
}

const okBody = `{"result":"0279be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f817"}`

func withLength(status, body string) string {
	return "HTTP/1.1 " + status + "\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

// TestResponseParsingBothClients: the response-parser cases, through a real socket, give the same
// class and cause with the fast client and with net/http.
func TestResponseParsingBothClients(t *testing.T) {
	for _, tc := range []struct {
		name  string
		raw   string
		close bool // the server closes after answering
		class Class
		cause string
	}{
		{"200 content-length", withLength("200 OK", okBody), false, Success, ""},
		{"200 chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"res\r\n" +
			strconv.FormatInt(int64(len(okBody)-5), 16) + "\r\n" + okBody[5:] + "\r\n0\r\n\r\n", false, Success, ""},
		{"200 chunked with trailers", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\nX-T: 1\r\n\r\n", false, Success, ""},
		{"100 continue first", "HTTP/1.1 100 Continue\r\n\r\n" + withLength("200 OK", okBody), false, Success, ""},
		{"103 early hints with headers first", "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\nLink: </b.js>; rel=preload\r\n\r\n" +
			"HTTP/1.1 103 Early Hints\r\nLink: </c>\r\n\r\n" + withLength("200 OK", okBody), false, Success, ""},
		{"connection close", strings.Replace(withLength("200 OK", okBody), "\r\n\r\n", "\r\nConnection: close\r\n\r\n", 1), true, Success, ""},
		{"close-delimited body", "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + okBody, true, Success, ""},
		{"http/1.0", "HTTP/1.0 200 OK\r\n\r\n" + okBody, true, Success, ""},
		{"rpc error", withLength("200 OK", `{"error":"Operation denied by policy"}`), false, Other, "rpc_error"},
		{"not json", withLength("200 OK", `<html></html>`), false, Other, "bad_response_body"},
		{"401", withLength("401 Unauthorized", `{"error":"Invalid or expired token. Please log in again."}`), false, Auth, "http_401"},
		{"403", withLength("403 Forbidden", `{"error":"denied"}`), false, Auth, "http_403"},
		{"429", withLength("429 Too Many Requests", `{"error":"slow down","code":"rate_limited"}`), false, RateLimited, "http_429"},
		{"503 admission rejected", withLength("503 Service Unavailable", `{"error":"server at capacity, retry shortly","code":"admission_rejected"}`), false, Intentional, "http_503_admission_rejected"},
		{"503 chunked admission rejected", "HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\n\r\n1d\r\n{\"code\":\"admission_rejected\"}\r\n0\r\n\r\n", false, Intentional, "http_503_admission_rejected"},
		{"503 other", withLength("503 Service Unavailable", `{"error":"Database temporarily unavailable"}`), false, Server, "http_503"},
		{"500", withLength("500 Internal Server Error", `{"error":"Database error"}`), false, Server, "http_500"},
		{"404", withLength("404 Not Found", ``), false, Client, "http_404"},
		{"302", "HTTP/1.1 302 Found\r\nLocation: /x\r\nContent-Length: 0\r\n\r\n", false, Other, "http_302"},
		{"malformed status code", "HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n", true, Network, "network_bad_response"},
		{"malformed status line", "HTTP/1.1\r\n\r\n", true, Network, "network_bad_response"},
		{"malformed header", "HTTP/1.1 200 OK\r\nbroken\r\n\r\n", true, Network, "network_bad_response"},
		{"bad content-length", "HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", true, Network, "network_bad_response"},
		{"conflicting content-length", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n{}", true, Network, "network_bad_response"},
		{"transfer-encoding gzip", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n{}", true, Network, "network_bad_response"},
		{"bad chunk size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n", true, Network, "network_bad_response"},
		{"chunk without CRLF", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}xx0\r\n\r\n", true, Network, "network_bad_response"},
		{"short body", "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{}", true, Network, "network_eof"},
		{"no response", "", true, Network, "network_eof"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachClient(t, func(t *testing.T, client string) {
				srv := newRawServer(t, answering(tc.raw, tc.close))
				r := clientRun(t, srv.url(), client)
				// Twice: the second request shows the first left the connection (or the pool) usable.
				for i := range 2 {
					if cl, cause := r.exchangeOnce(); cl != tc.class || cause != tc.cause {
						t.Fatalf("request %d: %s %q, want %s %q", i, cl, cause, tc.class, tc.cause)
					}
				}
				if got := srv.requests.Load(); got != 2 {
					t.Fatalf("the server read %d requests, want 2", got)
				}
			})
		})
	}
}

// TestIdleConnectionClosedByTheServerIsNotUsed: a server with a 5 ms idle timeout closes the
// pooled connection after its answer, without saying so. The next request finds it closed before
// a byte is written (the idle check) and goes out on a fresh connection: it does not fail, and
// the server reads it once. (The fast client's own check; net/http notices such a close with its
// background read, which races with a request sent the instant the server closes.)
func TestIdleConnectionClosedByTheServerIsNotUsed(t *testing.T) {
	closed := make(chan struct{}, 4)
	srv := newRawServer(t, func(srv *rawServer, c net.Conn, br *bufio.Reader, n int) bool {
		if n > 0 {
			c.SetReadDeadline(time.Now().Add(5 * time.Millisecond))
			if _, err := br.Peek(1); err != nil {
				c.Close()
				closed <- struct{}{}
				return false
			}
		}
		if !readRequest(br) {
			return false
		}
		srv.requests.Add(1)
		io.WriteString(c, withLength("200 OK", okBody))
		return true
	})
	r := clientRun(t, srv.url(), HTTPClientFast)
	for i := range 3 {
		if cl, cause := r.exchangeOnce(); cl != Success {
			t.Fatalf("request %d: %s %s", i, cl, cause)
		}
		testwait.Recv(t, closed, testwait.Long, "the server's close of the idle connection")
	}
	if n, reqs := srv.conns.Load(), srv.requests.Load(); n != 3 || reqs != 3 {
		t.Fatalf("%d connections, %d requests; want 3 and 3", n, reqs)
	}
}

// TestPartlyWrittenRequestIsNotRetried: the server answers the first request on a connection and
// closes it after reading 10 bytes of the second. Bytes of that request were written, so the
// server may have acted on it: it fails as a network error and is not sent again.
func TestPartlyWrittenRequestIsNotRetried(t *testing.T) {
	forEachClient(t, func(t *testing.T, client string) {
		srv := newRawServer(t, func(srv *rawServer, c net.Conn, br *bufio.Reader, n int) bool {
			if n == 1 {
				io.ReadFull(br, make([]byte, 10))
				return false
			}
			if !readRequest(br) {
				return false
			}
			srv.requests.Add(1)
			io.WriteString(c, withLength("200 OK", okBody))
			return true
		})
		r := clientRun(t, srv.url(), client)
		if cl, cause := r.exchangeOnce(); cl != Success {
			t.Fatalf("first request: %s %s", cl, cause)
		}
		if cl, cause := r.exchangeOnce(); cl != Network {
			t.Fatalf("second request: %s %s, want a network failure", cl, cause)
		}
		if n := srv.conns.Load(); n != 1 {
			t.Fatalf("%d connections: the partly written request was sent again", n)
		}
	})
}

// TestRequestWrittenInFullButUnansweredIsNotRetried: the old rule retried whenever no response
// byte came back. Now a request written in full to a reused connection that the server then
// closes is a failure, counted once.
func TestRequestWrittenInFullButUnansweredIsNotRetried(t *testing.T) {
	forEachClient(t, func(t *testing.T, client string) {
		srv := newRawServer(t, func(srv *rawServer, c net.Conn, br *bufio.Reader, n int) bool {
			if !readRequest(br) {
				return false
			}
			srv.requests.Add(1)
			if n == 1 {
				return false // read in full, never answered
			}
			io.WriteString(c, withLength("200 OK", okBody))
			return true
		})
		r := clientRun(t, srv.url(), client)
		r.exchangeOnce()
		if cl, cause := r.exchangeOnce(); cl != Network || cause != "network_eof" {
			t.Fatalf("second request: %s %s, want network_eof", cl, cause)
		}
		if n, reqs := srv.conns.Load(), srv.requests.Load(); n != 1 || reqs != 2 {
			t.Fatalf("%d connections, %d requests: want 1 and 2 (no retry)", n, reqs)
		}
	})
}

func TestUnknownHTTPClientIsRefused(t *testing.T) {
	cfg := baseConfig("http://127.0.0.1:1", 1)
	cfg.HTTPClient, cfg.Requests = "curl", 1
	_, err := Run(context.Background(), cfg)
	var ue *UsageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), `--http-client "curl": want fast or std`) {
		t.Fatalf("err %v, want a *UsageError naming --http-client", err)
	}
}

func TestHTTPClientIsRecorded(t *testing.T) {
	forEachClient(t, func(t *testing.T, client string) {
		f := newFakeServer(t, nil)
		cfg := baseConfig(f.URL, 1)
		cfg.HTTPClient, cfg.Requests, cfg.Method = client, 3, keycast.MethodSignEvent
		res, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if res.Metadata.HTTPClient != client || res.Summary.SuccessfulRequests != 3 {
			t.Fatalf("metadata %+v summary %+v", res.Metadata, res.Summary)
		}
	})
}
