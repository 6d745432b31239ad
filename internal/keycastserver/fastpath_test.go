package keycastserver

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/testwait"
)

// rawExchange writes raw bytes on a fresh connection and reads n responses.
func rawExchange(t *testing.T, addr, raw string, n int) []*http.Response {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	var out []*http.Response
	for i := 0; i < n; i++ {
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		res.Body = io.NopCloser(strings.NewReader(string(b)))
		out = append(out, res)
	}
	return out
}

func bodyOf(r *http.Response) string {
	b, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(strings.NewReader(string(b)))
	return string(b)
}

func rpcReq(host, tok, body string, extra ...string) string {
	var b strings.Builder
	b.WriteString("POST /api/nostr HTTP/1.1\r\nHost: " + host + "\r\nContent-Type: application/json\r\n")
	if tok != "" {
		b.WriteString("Authorization: Bearer " + tok + "\r\n")
	}
	for _, h := range extra {
		b.WriteString(h + "\r\n")
	}
	fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n%s", len(body), body)
	return b.String()
}

// TestFastPathMatchesNetHTTP sends the same requests through the fast path (Serve) and through
// net/http (Handler in httptest) and compares status, content type, Retry-After and body.
func TestFastPathMatchesNetHTTP(t *testing.T) {
	s, base := startInternal(t, Config{RPCRatePerSecond: 0.001, RPCBurst: 1000})
	tok, pub := grantToken(t, base)
	slow := httptest.NewServer(s.Handler())
	defer slow.Close()
	fastAddr := strings.TrimPrefix(base, "http://")
	slowAddr := strings.TrimPrefix(slow.URL, "http://")
	peer := keycast.MustGenerateSecretKey().Public().Hex()
	cases := []struct {
		name string
		req  func(host string) string
	}{
		{"get_public_key", func(h string) string { return rpcReq(h, tok, `{"method":"get_public_key","params":[]}`) }},
		{"get_public_key with origin", func(h string) string {
			return rpcReq(h, tok, `{"method": "get_public_key"}`, "Origin: https://x.example")
		}},
		{"unknown method", func(h string) string { return rpcReq(h, tok, `{"method":"nope","params":[]}`) }},
		{"missing token", func(h string) string { return rpcReq(h, "", `{"method":"get_public_key","params":[]}`) }},
		{"bad token", func(h string) string { return rpcReq(h, "x.y.z", `{"method":"get_public_key","params":[]}`) }},
		{"malformed", func(h string) string { return rpcReq(h, tok, `{"method":`) }},
		{"no method", func(h string) string { return rpcReq(h, tok, `{"params":[]}`) }},
		{"missing event", func(h string) string { return rpcReq(h, tok, `{"method":"sign_event","params":[]}`) }},
		{"foreign event", func(h string) string {
			return rpcReq(h, tok, `{"method":"sign_event","params":[{"pubkey":"`+peer+`","created_at":1,"kind":1,"tags":[],"content":""}]}`)
		}},
		{"policy denied", func(h string) string {
			return rpcReq(h, tok, `{"method":"sign_event","params":[{"pubkey":"`+pub+`","created_at":1,"kind":30023,"tags":[],"content":""}]}`)
		}},
		{"bad pubkey", func(h string) string { return rpcReq(h, tok, `{"method":"nip44_encrypt","params":["zz","x"]}`) }},
		{"text/plain", func(h string) string {
			return strings.Replace(rpcReq(h, tok, `{}`), "Content-Type: application/json", "Content-Type: text/plain", 1)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := rawExchange(t, fastAddr, tc.req(fastAddr), 1)[0]
			g := rawExchange(t, slowAddr, tc.req(slowAddr), 1)[0]
			for _, h := range []string{"Content-Type", "Retry-After", "Cache-Control", "Access-Control-Allow-Origin", "X-Content-Type-Options"} {
				if f.Header.Get(h) != g.Header.Get(h) {
					t.Errorf("%s: fast %q, net/http %q", h, f.Header.Get(h), g.Header.Get(h))
				}
			}
			if f.StatusCode != g.StatusCode || bodyOf(f) != bodyOf(g) {
				t.Errorf("fast %d %q, net/http %d %q", f.StatusCode, bodyOf(f), g.StatusCode, bodyOf(g))
			}
			if f.Header.Get("Date") == "" || f.ContentLength != int64(len(bodyOf(f))) {
				t.Errorf("fast path headers %v", f.Header)
			}
		})
	}
}

func TestFastPathConnectionHandling(t *testing.T) {
	s, base := startInternal(t, Config{})
	tok, pub := grantToken(t, base)
	addr := strings.TrimPrefix(base, "http://")
	gpk := `{"method":"get_public_key","params":[]}`
	want := `{"result":"` + pub + `"}`

	t.Run("pipelined requests answered in order", func(t *testing.T) {
		raw := rpcReq(addr, tok, gpk) + rpcReq(addr, tok, `{"method":"nope"}`) + rpcReq(addr, tok, gpk)
		rs := rawExchange(t, addr, raw, 3)
		if bodyOf(rs[0]) != want || rs[1].StatusCode != 400 || bodyOf(rs[2]) != want {
			t.Fatalf("pipelined answers: %q %d %q", bodyOf(rs[0]), rs[1].StatusCode, bodyOf(rs[2]))
		}
	})
	t.Run("answer is not held behind a half-sent pipelined request", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		second := rpcReq(addr, tok, gpk)
		io.WriteString(c, rpcReq(addr, tok, gpk)+second[:20])
		br := bufio.NewReader(c)
		r, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("first answer withheld: %v", err)
		}
		if b, _ := io.ReadAll(r.Body); string(b) != want {
			t.Fatalf("first answer %q", b)
		}
		io.WriteString(c, second[20:])
		if r, err = http.ReadResponse(br, nil); err != nil || r.StatusCode != 200 {
			t.Fatalf("second answer: %v", err)
		}
	})
	t.Run("deep pipeline in one write, bodies cut by the buffer's end", func(t *testing.T) {
		// Well over the fast path's 4 KiB read buffer, so the server tops its buffer up from the
		// socket (fastSock.topUp) between answers, and with request sizes that drift against the
		// buffer's length some bodies are cut by its end: the auth strings must survive the
		// buffer moving under them (good and bad tokens alternate, each answered as such).
		var raw strings.Builder
		var wantStatus []int
		for i := 0; i < 60; i++ {
			pad := `{"method":"get_public_key","params":[],"pad":"` + strings.Repeat("p", i*7%97) + `"}`
			if i%3 == 2 {
				raw.WriteString(rpcReq(addr, tok+"x", pad))
				wantStatus = append(wantStatus, 401)
			} else {
				raw.WriteString(rpcReq(addr, tok, pad))
				wantStatus = append(wantStatus, 200)
			}
		}
		if raw.Len() < 3*fastReadBuf {
			t.Fatalf("pipeline of %d bytes does not cross the read buffer", raw.Len())
		}
		rs := rawExchange(t, addr, raw.String(), len(wantStatus))
		for i, r := range rs {
			if r.StatusCode != wantStatus[i] || (wantStatus[i] == 200 && bodyOf(r) != want) {
				t.Fatalf("answer %d: %d %q, want %d", i, r.StatusCode, bodyOf(r), wantStatus[i])
			}
		}
	})
	t.Run("token changes on one connection", func(t *testing.T) {
		raw := rpcReq(addr, tok, gpk) + rpcReq(addr, tok+"x", gpk) + rpcReq(addr, tok, gpk)
		rs := rawExchange(t, addr, raw, 3)
		if rs[0].StatusCode != 200 || rs[1].StatusCode != 401 || rs[2].StatusCode != 200 {
			t.Fatalf("statuses %d %d %d", rs[0].StatusCode, rs[1].StatusCode, rs[2].StatusCode)
		}
	})
	t.Run("handoff to net/http mid-connection keeps the stream", func(t *testing.T) {
		raw := rpcReq(addr, tok, gpk) +
			"GET /health HTTP/1.1\r\nHost: " + addr + "\r\n\r\n" +
			rpcReq(addr, tok, gpk) +
			"GET /api/policies HTTP/1.1\r\nHost: " + addr + "\r\n\r\n"
		rs := rawExchange(t, addr, raw, 4)
		if bodyOf(rs[0]) != want || rs[1].StatusCode != 200 || bodyOf(rs[2]) != want || !strings.Contains(bodyOf(rs[3]), `"social"`) {
			t.Fatalf("answers %d %q / %d / %d %q / %d", rs[0].StatusCode, bodyOf(rs[0]), rs[1].StatusCode, rs[2].StatusCode, bodyOf(rs[2]), rs[3].StatusCode)
		}
	})
	t.Run("chunked body goes to net/http", func(t *testing.T) {
		raw := "POST /api/nostr HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nAuthorization: Bearer " + tok +
			"\r\nTransfer-Encoding: chunked\r\n\r\n" + fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(gpk), gpk)
		if r := rawExchange(t, addr, raw, 1)[0]; bodyOf(r) != want {
			t.Fatalf("chunked: %d %q", r.StatusCode, bodyOf(r))
		}
	})
	t.Run("HTTP/1.0 goes to net/http", func(t *testing.T) {
		raw := strings.Replace(rpcReq(addr, tok, gpk), "HTTP/1.1", "HTTP/1.0", 1)
		if r := rawExchange(t, addr, raw, 1)[0]; bodyOf(r) != want {
			t.Fatalf("HTTP/1.0: %d %q", r.StatusCode, bodyOf(r))
		}
	})
	t.Run("huge header goes to net/http", func(t *testing.T) {
		raw := rpcReq(addr, tok, gpk, "X-Padding: "+strings.Repeat("p", 6000))
		if r := rawExchange(t, addr, raw, 1)[0]; bodyOf(r) != want {
			t.Fatalf("huge header: %d %q", r.StatusCode, bodyOf(r))
		}
	})
	t.Run("body larger than the limit is 413", func(t *testing.T) {
		big := `{"method":"x","params":["` + strings.Repeat("a", 70<<10) + `"]}`
		if r := rawExchange(t, addr, rpcReq(addr, tok, big), 1)[0]; r.StatusCode != 413 {
			t.Fatalf("oversized body: %d", r.StatusCode)
		}
	})
	t.Run("body arriving after the head", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		req := rpcReq(addr, tok, gpk)
		cut := strings.Index(req, "\r\n\r\n") + 4
		io.WriteString(c, req[:cut-10])
		io.WriteString(c, req[cut-10:cut+5])
		io.WriteString(c, req[cut+5:])
		r, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := io.ReadAll(r.Body); string(b) != want {
			t.Fatalf("split request: %q", b)
		}
	})
	t.Run("Connection: close is honoured", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c, rpcReq(addr, tok, gpk, "Connection: close"))
		all, err := io.ReadAll(c) // ends only when the server closes
		if err != nil || !strings.Contains(string(all), "Connection: close") || !strings.HasSuffix(string(all), want) {
			t.Fatalf("close: %v %q", err, all)
		}
	})
	t.Run("missing Host", func(t *testing.T) {
		raw := "POST /api/nostr HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
		if r := rawExchange(t, addr, raw, 1)[0]; r.StatusCode != 400 {
			t.Fatalf("no Host: %d", r.StatusCode)
		}
	})
	t.Run("shutdown closes idle connections", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, rpcReq(addr, tok, gpk))
		br := bufio.NewReader(c)
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.ReadAll(res.Body)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Fatalf("Shutdown with an idle keep-alive connection: %v", err)
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := br.ReadByte(); err == nil {
			t.Fatal("idle connection still open after Shutdown")
		}
	})
}

func FuzzParseHead(f *testing.F) {
	s := &Server{cfg: Config{}.withDefaults()}
	f.Add([]byte("POST /api/nostr HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nContent-Type: application/json\r\n\r\n"))
	f.Add([]byte("POST /api/nostr HTTP/1.1\r\nHost: a\r\nHost: b\r\nContent-Length: 2\r\n\r\n"))
	f.Add([]byte("POST /api/nostr HTTP/1.1\r\nhost:a\r\ncontent-length:99999999999999999999\r\n\r\n"))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Fuzz(func(t *testing.T, head []byte) {
		r, ok := s.parseHead(head)
		if !ok {
			return
		}
		if r.contentLength < 0 || r.contentLength > s.cfg.BodyLimit || r.host == "" {
			t.Fatalf("accepted %q as %+v", head, r)
		}
	})
}

// FuzzHeadMemo checks that headMemo answers exactly as parseHead does, whatever sequence of
// heads a connection sends: a head, another, the first again (fresh bytes each time, as the read
// buffer holds them).
func FuzzHeadMemo(f *testing.F) {
	s := &Server{cfg: Config{}.withDefaults()}
	h := "POST /api/nostr HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer t\r\nContent-Length: 2\r\nContent-Type: application/json\r\n\r\n"
	f.Add([]byte(h), []byte(h))
	f.Add([]byte(h), []byte(strings.Replace(h, "Bearer t", "Bearer u", 1)))
	f.Add([]byte(h), []byte(strings.Replace(h, "Host: a", "Host: b", 1)))
	f.Add([]byte(h), []byte("GET / HTTP/1.1\r\n\r\n"))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		var m headMemo
		for i, head := range [][]byte{a, b, a, b, b} {
			head = bytes.Clone(head)
			want, wantOK := s.parseHead(head)
			got, gotOK := m.parse(s, head)
			if got != want || gotOK != wantOK {
				t.Fatalf("head %d %q: memo %+v %v, parseHead %+v %v", i, head, got, gotOK, want, wantOK)
			}
		}
	})
}

// TestFastSockTopUp checks the read that does not wait: after a read that filled the buffer it
// takes what the socket holds, and with nothing there it returns at once, leaving the buffer as
// it was; after a read that did not fill the buffer it reads nothing.
func TestFastSockTopUp(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	sc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	sock := newFastSock(sc)
	if sock.rc == nil {
		t.Skip("no raw socket reads on this platform")
	}
	br := bufio.NewReaderSize(sock, 64)
	payload := bytes.Repeat([]byte("0123456789abcdef"), 6) // 96 bytes: more than the buffer
	if _, err := client.Write(payload); err != nil {
		t.Fatal(err)
	}
	sc.SetReadDeadline(time.Now().Add(10 * time.Second))
	waitBuffered := func(n int) {
		t.Helper()
		if _, err := br.Peek(n); err != nil {
			t.Fatalf("peek %d: %v", n, err)
		}
	}
	waitBuffered(64)
	if !sock.filled {
		t.Fatal("a read that filled the buffer is not marked filled")
	}
	br.Discard(40)
	// The other 32 bytes may still be on their way through loopback: wait for the kernel to
	// hold them, then top up (which must not wait itself).
	testwait.Eventually(t, testwait.Long, "32 more bytes readable on the socket", func() bool { return socketReadable(sock.rc) >= 32 })
	if !sock.topUp(br) || br.Buffered() != 24+32 {
		t.Fatalf("topUp after a full read: buffered %d, want 56", br.Buffered())
	}
	if got, _ := br.Peek(56); !bytes.Equal(got, payload[40:]) {
		t.Fatalf("topped-up bytes %q", got)
	}
	// Nothing more in the socket: topUp returns at once and changes nothing.
	sock.filled = true
	start := time.Now()
	if sock.topUp(br) {
		t.Fatal("topUp read from an empty socket")
	}
	if time.Since(start) > time.Second || br.Buffered() != 56 {
		t.Fatalf("topUp on an empty socket: took %v, buffered %d", time.Since(start), br.Buffered())
	}
	// The waiting read still works after it.
	br.Discard(56)
	client.Write([]byte("xy"))
	if b, err := br.ReadByte(); err != nil || b != 'x' {
		t.Fatalf("read after topUp: %q %v", b, err)
	}
	if sock.filled {
		t.Fatal("a short read is marked filled")
	}
	if sock.topUp(br) {
		t.Fatal("topUp read after a short read")
	}
}
