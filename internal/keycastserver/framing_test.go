package keycastserver

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"
)

// streamConn is a net.Conn reading a fixed stream in pieces of the given sizes (cycled).
type streamConn struct {
	r     *bytes.Reader
	sizes []byte
	i     int
}

func (c *streamConn) Read(p []byte) (int, error) {
	if len(c.sizes) > 0 {
		n := int(c.sizes[c.i%len(c.sizes)])%64 + 1
		c.i++
		p = p[:min(len(p), n)]
	}
	return c.r.Read(p)
}
func (c *streamConn) Write(p []byte) (int, error)      { return len(p), nil }
func (c *streamConn) Close() error                     { return nil }
func (c *streamConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *streamConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *streamConn) SetDeadline(time.Time) error      { return nil }
func (c *streamConn) SetReadDeadline(time.Time) error  { return nil }
func (c *streamConn) SetWriteDeadline(time.Time) error { return nil }

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// FuzzFramingGuard: net/http's request parser, reading what the guard passes on, never finds
// a request head where the guard did not see one (so the two agree on every boundary), and
// never completes the request the guard refused or anything after it.
func FuzzFramingGuard(f *testing.F) {
	for _, s := range []string{
		"POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n{}GET / HTTP/1.1\r\nHost: h\r\n\r\n",
		"POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n",
		"POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /x HTTP/1.1\r\n\r\n",
		"POST /a HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}GET /x HTTP/1.1\r\n\r\n",
		"POST /a HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"POST /a HTTP/1.1\r\nTransfer-Encoding:\r\n chunked\r\n\r\n0\r\n\r\n",
		"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1 \r\nhello\r\n0\r\nX-Trailer: 1\r\n\r\n",
		"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\n{}\r\n0\r\n\r\nGET / HTTP/1.1\r\n\r\n",
		"GET / HTTP/1.1\nHost: h\n\nGET / HTTP/1.1\r\n\r\n",
		"POST /a HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\nxx",
		"\r\n\r\nGET / HTTP/1.1\r\n\r\n",
	} {
		f.Add([]byte(s), []byte{63})
		f.Add([]byte(s), []byte{0, 3, 7})
	}
	f.Fuzz(func(t *testing.T, stream, sizes []byte) {
		var heads []int64
		g := newFramingGuard(&streamConn{r: bytes.NewReader(stream), sizes: sizes})
		g.heads = &heads
		g.startHead() // record the first head again, now that heads is set
		passed, _ := io.ReadAll(g)

		cr := &countingReader{r: bytes.NewReader(passed)}
		br := bufio.NewReader(cr)
		for {
			start := cr.n - int64(br.Buffered())
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			if !slices.Contains(heads, start) {
				t.Fatalf("net/http found a request head at %d, the guard at %v, in %q", start, heads, stream)
			}
			_, err = io.Copy(io.Discard, req.Body)
			if g.refused.Load() && start >= g.refusedAt && err == nil {
				t.Fatalf("net/http read the refused request at %d (%s %s) whole in %q", start, req.Method, req.URL, stream)
			}
			if err != nil {
				return
			}
		}
	})
}
