package httpwire

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

const testMaxBody = 1 << 20

func read(raw string) (Response, []string, error) {
	var cookies []string
	r, err := ReadResponse(bufio.NewReaderSize(strings.NewReader(raw), 4096), nil, testMaxBody, func(v []byte) { cookies = append(cookies, string(v)) })
	return r, cookies, err
}

func TestReadResponse(t *testing.T) {
	for _, tc := range []struct {
		name, raw string
		status    int
		body      string
		close     bool
		err       string
	}{
		{"content-length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", 200, "hello", false, ""},
		{"case-insensitive headers", "HTTP/1.1 200 OK\r\ncOnTeNt-LeNgTh: 2\r\nCONNECTION: Close\r\n\r\nhi", 200, "hi", true, ""},
		{"connection token list", "HTTP/1.1 200 OK\r\nConnection: foo, close\r\nContent-Length: 0\r\n\r\n", 200, "", true, ""},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nTrailer-Field: x\r\n\r\n", 200, "hello world", false, ""},
		{"chunked, size with trailing white space", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2 \r\nhi\r\n0\r\n\r\n", 200, "hi", false, ""},
		{"chunked and content-length", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n", 200, "hi", true, ""},
		{"close-delimited", "HTTP/1.1 503 Service Unavailable\r\n\r\n{\"error\":\"x\"}", 503, `{"error":"x"}`, true, ""},
		{"http/1.0", "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", 200, "ok", true, ""},
		{"http/1.0 keep-alive", "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok", 200, "ok", false, ""},
		{"http/1.0 ignores transfer-encoding", "HTTP/1.0 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nraw", 200, "raw", true, ""},
		{"no reason phrase", "HTTP/1.1 204\r\n\r\n", 204, "", false, ""},
		{"304 has no body", "HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n", 304, "", false, ""},
		{"bare LF", "HTTP/1.1 200 OK\nContent-Length: 1\n\nx", 200, "x", false, ""},
		{"repeated equal lengths", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nhi", 200, "hi", false, ""},
		{"100 continue skipped", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 200, "ok", false, ""},
		{"103 early hints skipped", "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\nSet-Cookie: early=1\r\n\r\n" +
			"HTTP/1.1 103 Early Hints\r\nLink: </b.js>; rel=preload\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok", 201, "ok", false, ""},
		{"101 is final", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\nnot http", 101, "", true, ""},
		{"bad status line", "HTTP/2 200\r\n\r\n", 0, "", false, "bad status line"},
		{"bad version digit", "HTTP/1.x 200 OK\r\n\r\n", 0, "", false, "bad status line"},
		{"bad code", "HTTP/1.1 2x0 OK\r\n\r\n", 0, "", false, "bad status code"},
		{"code out of range", "HTTP/1.1 600 OK\r\n\r\n", 0, "", false, "bad status code"},
		{"code without space", "HTTP/1.1 200\tOK\r\n\r\n", 0, "", false, "bad status code"},
		{"bad length", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", 0, "", false, "bad Content-Length"},
		{"empty length", "HTTP/1.1 200 OK\r\nContent-Length: \r\n\r\n", 0, "", false, "bad Content-Length"},
		{"conflicting lengths", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxx", 0, "", false, "conflicting Content-Length"},
		{"lengths equal only in value", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 02\r\n\r\nxx", 0, "", false, "conflicting Content-Length"},
		{"gzip", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", 0, "", false, "unsupported Transfer-Encoding"},
		{"gzip, chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 0, "", false, "unsupported Transfer-Encoding"},
		{"two transfer-encoding lines", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 0, "", false, "unsupported Transfer-Encoding"},
		{"trailer names a framing field", "HTTP/1.1 200 OK\r\nTrailer: Content-Length\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 0, "", false, "framing field"},
		{"bad chunk", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 0, "", false, "bad chunk size"},
		{"chunk size with space before extension", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2 ;x\r\nhi\r\n0\r\n\r\n", 0, "", false, "bad chunk size"},
		{"chunk line with bare LF", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\nhi\r\n0\r\n\r\n", 0, "", false, "CRLF"},
		{"chunk data without CRLF", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\n0\r\n\r\n", 0, "", false, "not followed by CRLF"},
		{"trailer section ending in bare LF", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\n", 0, "", false, "CRLF"},
		{"trailer line ending in bare LF", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: 1\n\r\n", 0, "", false, "CRLF"},
		{"bad trailer", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nno colon\r\n\r\n", 0, "", false, "bad header line"},
		{"short body", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", 0, "", false, "unexpected EOF"},
		{"short chunked body", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", 0, "", false, "unexpected EOF"},
		{"header without colon", "HTTP/1.1 200 OK\r\nbroken\r\n\r\n", 0, "", false, "bad header line"},
		{"obs-fold", "HTTP/1.1 200 OK\r\nX-A: 1\r\n 2\r\n\r\n", 0, "", false, "bad header line"},
		{"name with space", "HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\nhi", 0, "", false, "bad header line"},
		{"CR inside a value", "HTTP/1.1 200 OK\r\nX-A: 1\r\r\n\r\n", 0, "", false, "control byte"},
		{"cut in the head", "HTTP/1.1 200 OK\r\nContent-Le", 0, "", false, "unexpected EOF"},
		{"cut after an interim response", "HTTP/1.1 100 Continue\r\n\r\n", 0, "", false, "unexpected EOF"},
		{"nothing", "", 0, "", false, "no response"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _, err := read(tc.raw)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || r.Status != tc.status || string(r.Body) != tc.body || r.Close != tc.close {
				t.Fatalf("got %d %q close=%v err=%v", r.Status, r.Body, r.Close, err)
			}
		})
	}
}

func TestReadResponseErrors(t *testing.T) {
	_, _, err := read("")
	if !errors.Is(err, ErrNoResponse) || !errors.Is(err, io.EOF) {
		t.Fatalf("empty stream: %v, want ErrNoResponse wrapping io.EOF", err)
	}
	_, _, err = read("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nab")
	if !errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, ErrNoResponse) {
		t.Fatalf("short body: %v", err)
	}
	var me *MalformedError
	if _, _, err = read("HTTP/9.9 200 OK\r\n\r\n"); !errors.As(err, &me) {
		t.Fatalf("bad status line: %v, want a *MalformedError", err)
	}
}

func TestInterimCookiesAreNotTheAnswers(t *testing.T) {
	_, cookies, err := read("HTTP/1.1 103 Early Hints\r\nSet-Cookie: early=1\r\n\r\nHTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\nContent-Length: 0\r\n\r\n")
	if err != nil || strings.Join(cookies, ";") != "a=1;b=2" {
		t.Fatalf("cookies %q, err %v", cookies, err)
	}
}

func TestInterimResponsesAreBounded(t *testing.T) {
	hint := "HTTP/1.1 103 Early Hints\r\nLink: <" + strings.Repeat("x", 1000) + ">\r\n\r\n"
	_, _, err := read(strings.Repeat(hint, MaxInterimBytes/len(hint)+1) + "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
	if err == nil || !strings.Contains(err.Error(), "interim") {
		t.Fatalf("err %v", err)
	}
	_, _, err = read(strings.Repeat(hint, MaxInterimBytes/len(hint)-1) + "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
	if err != nil {
		t.Fatalf("fewer hints than the bound: %v", err)
	}
}

func TestReadResponseBoundsTheBody(t *testing.T) {
	big := strings.Repeat("x", testMaxBody+100)
	chunked := strconv.FormatInt(int64(len(big)), 16) + "\r\n" + big + "\r\n0\r\n\r\n"
	for name, raw := range map[string]string{
		"content-length": "HTTP/1.1 200 OK\r\nContent-Length: " + strconv.Itoa(len(big)) + "\r\n\r\n" + big,
		"chunked":        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked,
	} {
		br := bufio.NewReaderSize(strings.NewReader(raw+"HTTP/1.1 204 No Content\r\n\r\n"), 4096)
		r, err := ReadResponse(br, nil, testMaxBody, nil)
		if err != nil || len(r.Body) != testMaxBody {
			t.Fatalf("%s: kept %d bytes, err %v", name, len(r.Body), err)
		}
		// The rest was read and dropped, so the next response on the connection reads cleanly.
		if r, err = ReadResponse(br, nil, testMaxBody, nil); err != nil || r.Status != 204 {
			t.Fatalf("%s: next response %d %v", name, r.Status, err)
		}
	}
	r, _, err := read("HTTP/1.1 200 OK\r\n\r\n" + big)
	if err != nil || len(r.Body) != testMaxBody {
		t.Fatalf("close-delimited: kept %d bytes, err %v", len(r.Body), err)
	}
}

func TestReadResponseReusesTheBodyBuffer(t *testing.T) {
	buf := make([]byte, 0, 64)
	r, err := ReadResponse(bufio.NewReader(strings.NewReader("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")), buf, testMaxBody, nil)
	if err != nil || &r.Body[:1][0] != &buf[:1][0] {
		t.Fatalf("body not read into the buffer given (err %v)", err)
	}
}

// FuzzReadResponse checks ReadResponse against net/http on arbitrary bytes: whatever it accepts,
// http.ReadResponse (with the Transport's skipping of interim responses) accepts with the same
// status, body and connection reuse. It never keeps more than maxBody bytes and never panics.
// It may refuse what net/http takes (a status outside 100..599, names with spaces, obs-fold).
func FuzzReadResponse(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nSet-Cookie: a=b\r\n\r\n{\"code\":\"admission_rejected\"}",
		"HTTP/1.0 204\r\n\r\n",
		"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffff\r\n",
		"garbage",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		const maxBody = 64
		r, err := ReadResponse(bufio.NewReaderSize(bytes.NewReader(b), 4096), nil, maxBody, func([]byte) {})
		if len(r.Body) > maxBody {
			t.Fatalf("kept %d bytes", len(r.Body))
		}
		if err != nil {
			return
		}
		if r.Status < 100 || r.Status > 599 {
			t.Fatalf("status %d", r.Status)
		}
		br := bufio.NewReaderSize(bytes.NewReader(b), 4096)
		var resp *http.Response
		for {
			if resp, err = http.ReadResponse(br, nil); err != nil {
				t.Fatalf("accepted %q (status %d), net/http refuses it: %v", b, r.Status, err)
			}
			if resp.StatusCode >= 200 || resp.StatusCode == 101 {
				break
			}
		}
		if resp.StatusCode != r.Status {
			t.Fatalf("%q: status %d, net/http %d", b, r.Status, resp.StatusCode)
		}
		if r.Status == 101 {
			return // net/http hands the connection over as the body
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("accepted %q, net/http fails reading its body: %v", b, err)
		}
		if !bytes.HasPrefix(body, r.Body) || len(r.Body) != min(len(body), maxBody) {
			t.Fatalf("%q: body %q, net/http %q", b, r.Body, body)
		}
		if resp.Close != r.Close && !(r.Close && resp.ContentLength < 0) {
			t.Fatalf("%q: close %v, net/http %v", b, r.Close, resp.Close)
		}
	})
}
