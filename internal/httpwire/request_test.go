package httpwire

import (
	"bufio"
	"bytes"
	"net/http"
	"testing"
)

func TestParseRequestHead(t *testing.T) {
	const base = "POST /api/nostr HTTP/1.1\r\nHost: a:3000\r\nContent-Length: 12\r\n"
	for _, tc := range []struct {
		name, head string
		ok         bool
		check      func(RequestHead) bool
	}{
		{"plain", base + "Content-Type: application/json\r\nAuthorization: Bearer x\r\n\r\n", true, func(r RequestHead) bool {
			return string(r.Method) == "POST" && string(r.Target) == "/api/nostr" && r.Minor == 1 && r.ContentLength == 12 &&
				string(r.Host) == "a:3000" && string(r.Authorization) == "Bearer x" && string(r.ContentType) == "application/json" && !r.Close && !r.Origin
		}},
		{"names in any case, white space trimmed", "POST /x HTTP/1.1\r\nhOsT:\ta \r\ncontent-LENGTH:  0\r\nCONNECTION: Close\r\nOrigin: o\r\n\r\n", true, func(r RequestHead) bool {
			return string(r.Host) == "a" && r.ContentLength == 0 && r.Close && r.Origin
		}},
		{"no body length", "GET /?q=%20 HTTP/1.1\r\nHost: a\r\n\r\n", true, func(r RequestHead) bool { return r.ContentLength == -1 && string(r.Target) == "/?q=%20" }},
		{"HTTP/1.0 closes", "POST / HTTP/1.0\r\n\r\n", true, func(r RequestHead) bool { return r.Minor == 0 && r.Close && r.Host == nil }},
		{"HTTP/1.0 keep-alive", "POST / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", true, func(r RequestHead) bool { return !r.Close }},
		{"empty authorization", base + "Authorization: \r\n\r\n", true, func(r RequestHead) bool { return len(r.Authorization) == 0 }},
		{"HTTP/1.1 without Host", "POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n", false, nil},
		{"empty Host", "POST / HTTP/1.1\r\nHost:\r\n\r\n", false, nil},
		{"bad Host byte", "POST / HTTP/1.1\r\nHost: a b\r\n\r\n", false, nil},
		{"two Hosts", base + "Host: b\r\n\r\n", false, nil},
		{"two lengths", base + "Content-Length: 12\r\n\r\n", false, nil},
		{"signed length", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +1\r\n\r\n", false, nil},
		{"19-digit length", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1234567890123456789\r\n\r\n", false, nil},
		{"two authorizations", base + "Authorization: a\r\nAuthorization: b\r\n\r\n", false, nil},
		{"two content types", base + "Content-Type: a\r\nContent-Type: b\r\n\r\n", false, nil},
		{"connection upgrade", base + "Connection: upgrade\r\n\r\n", false, nil},
		{"chunked", base + "Transfer-Encoding: chunked\r\n\r\n", false, nil},
		{"expect", base + "Expect: 100-continue\r\n\r\n", false, nil},
		{"upgrade", base + "Upgrade: h2c\r\n\r\n", false, nil},
		{"te", base + "TE: trailers\r\n\r\n", false, nil},
		{"trailer", base + "Trailer: x\r\n\r\n", false, nil},
		{"bare LF", "POST / HTTP/1.1\r\nHost: a\n\r\n", false, nil},
		{"obs-fold", base + "X: 1\r\n 2\r\n\r\n", false, nil},
		{"name with space", base + "X Y: 1\r\n\r\n", false, nil},
		{"control byte in a value", base + "X: a\x01b\r\n\r\n", false, nil},
		{"HTTP/2", "POST / HTTP/2.0\r\nHost: a\r\n\r\n", false, nil},
		{"absolute form", "POST http://a/ HTTP/1.1\r\nHost: a\r\n\r\n", false, nil},
		{"bad escape", "POST /%zz HTTP/1.1\r\nHost: a\r\n\r\n", false, nil},
		{"space in target", "POST /a b HTTP/1.1\r\nHost: a\r\n\r\n", false, nil},
		{"not a head", "POST / HTTP/1.1\r\nHost: a\r\n", false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, ok := ParseRequestHead([]byte(tc.head))
			if ok != tc.ok || (ok && !tc.check(r)) {
				t.Fatalf("ok=%v %+v", ok, r)
			}
		})
	}
}

func TestIsJSONMediaType(t *testing.T) {
	for v, want := range map[string]bool{
		"application/json": true, "Application/JSON; charset=utf-8": true, " application/json ": true,
		"application/vnd.api+json": true, "application/+json": false, "text/json": false, "application/j\u017fon": false, "": false,
	} {
		if got := IsJSONMediaType([]byte(v)); got != want {
			t.Errorf("IsJSONMediaType(%q) = %v", v, got)
		}
	}
}

// FuzzParseRequestHead checks ParseRequestHead against net/http: whatever head it accepts,
// http.ReadRequest reads with the same method, target, Host, Content-Length, Authorization,
// Content-Type and Close, and with no header net/http's server refuses.
func FuzzParseRequestHead(f *testing.F) {
	f.Add([]byte("POST /api/nostr HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nContent-Type: application/json\r\n\r\n"))
	f.Add([]byte("POST /api/nostr HTTP/1.1\r\nHost: a\r\nHost: b\r\nContent-Length: 2\r\n\r\n"))
	f.Add([]byte("POST /api/nostr HTTP/1.1\r\nhost:a\r\ncontent-length:99999999999999999999\r\n\r\n"))
	f.Add([]byte("GET /?a=%41 HTTP/1.0\r\nConnection: keep-alive\r\nAuthorization: Bearer t\r\n\r\n"))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Fuzz(func(t *testing.T, head []byte) {
		r, ok := ParseRequestHead(head)
		if !ok {
			return
		}
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(head)))
		if err != nil {
			t.Fatalf("accepted %q, net/http refuses it: %v", head, err)
		}
		if req.Method != string(r.Method) || req.RequestURI != string(r.Target) || req.ProtoMinor != r.Minor {
			t.Fatalf("%q: %s %s 1.%d, net/http %s %s 1.%d", head, r.Method, r.Target, r.Minor, req.Method, req.RequestURI, req.ProtoMinor)
		}
		if len(req.Header["Host"]) > 1 || req.Host != string(r.Host) {
			t.Fatalf("%q: Host %q, net/http %q", head, r.Host, req.Header["Host"])
		}
		if want := max(r.ContentLength, 0); req.ContentLength != want {
			t.Fatalf("%q: Content-Length %d, net/http %d", head, r.ContentLength, req.ContentLength)
		}
		for name, got := range map[string][]byte{"Authorization": r.Authorization, "Content-Type": r.ContentType} {
			vv := req.Header[name]
			if len(vv) > 1 || (len(vv) == 0 && len(got) > 0) || (len(vv) == 1 && vv[0] != string(got)) {
				t.Fatalf("%q: %s %q, net/http %q", head, name, got, vv)
			}
		}
		if req.Close != r.Close {
			t.Fatalf("%q: close %v, net/http %v", head, r.Close, req.Close)
		}
		for name, vv := range req.Header {
			if !isToken([]byte(name)) {
				t.Fatalf("%q: net/http's server refuses the header name %q", head, name)
			}
			for _, v := range vv {
				if !validValue([]byte(v)) {
					t.Fatalf("%q: net/http's server refuses the value %q", head, v)
				}
			}
		}
	})
}
