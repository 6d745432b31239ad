//go:build linux && e2e

package faults_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/linkkeys"
	"github.com/loadproof/loadproof/internal/linkkeysload"
	"github.com/loadproof/loadproof/internal/linkkeysserver"
)

// The bandwidth scenarios bound a client's throughput by what the injected bandwidth lets
// through: the bytes the server sends per operation, measured here on a direct connection (no
// proxy) with a connection that counts what it reads.

// countingConn counts the bytes read from a connection.
type countingConn struct {
	net.Conn
	n atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// lkBytes returns what the LinkKeys server sends for one TLS handshake (up to the client's
// Finished) and for one request of op on an established connection (the second request, so the
// session tickets that follow a handshake are not counted).
func lkBytes(t *testing.T, ts *linkkeysserver.TestServer, op string) (handshake, response int64) {
	t.Helper()
	raw, err := net.DialTimeout("tcp", ts.Addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	cc := &countingConn{Conn: raw}
	c := tls.Client(cc, ts.ClientTLSConfig())
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if err := c.Handshake(); err != nil {
		t.Fatal(err)
	}
	handshake = cc.n.Load()
	frame, err := linkkeysload.RequestFrame(op)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReaderSize(c, 1) // read no further than the frame needs
	for i := range 2 {
		before := cc.n.Load()
		if err := writeAll(c, frame); err != nil {
			t.Fatal(err)
		}
		if _, err := linkkeys.ReadFrame(br, linkkeys.MaxFrameSize, nil); err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			response = cc.n.Load() - before
		}
	}
	return handshake, response
}

// kcResponseBytes returns what the Keycast server sends for one sign_event request on a kept-alive
// connection: status line, headers and body.
func kcResponseBytes(t *testing.T, baseURL string, user keycast.TestUser) int64 {
	t.Helper()
	var cc *countingConn
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		cc = &countingConn{Conn: c}
		return cc, nil
	}, MaxIdleConnsPerHost: 1}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var n int64
	for i := range 2 {
		body, err := keycast.AppendRPCBody(nil, keycast.MethodSignEvent, user.Pubkey, time.Now().Unix(), "")
		if err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequest(http.MethodPost, baseURL+"/api/nostr", strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+user.UcanToken)
		req.Header.Set("Content-Type", "application/json")
		var before int64
		if cc != nil {
			before = cc.n.Load()
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("sign_event: HTTP %d %s %v", resp.StatusCode, b, err)
		}
		if i == 1 {
			n = cc.n.Load() - before
		}
	}
	return n
}
