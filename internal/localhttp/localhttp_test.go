package localhttp

import (
	"bytes"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func tcp(ip string, port int) *net.TCPAddr { return &net.TCPAddr{IP: net.ParseIP(ip), Port: port} }

// ok answers 200 with the query it saw, so a test can check what the inner handler got.
var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok " + r.URL.RawQuery)) })

func do(t *testing.T, h http.Handler, method, host, target string, mod func(*http.Request)) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, target, nil)
	r.Host = host
	r.RemoteAddr = "127.0.0.1:50000"
	if mod != nil {
		mod(r)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestHostCheck(t *testing.T) {
	for _, tc := range []struct {
		name  string
		bound *net.TCPAddr
		token string
		host  string
		want  int
	}{
		{"bound address", tcp("127.0.0.1", 8080), "", "127.0.0.1:8080", 200},
		{"localhost", tcp("127.0.0.1", 8080), "", "localhost:8080", 200},
		{"localhost upper case, trailing dot", tcp("127.0.0.1", 8080), "", "LocalHost.:8080", 200},
		{"other loopback v4", tcp("127.0.0.1", 8080), "", "127.0.0.2:8080", 200},
		{"loopback v6", tcp("127.0.0.1", 8080), "", "[::1]:8080", 200},
		{"foreign name", tcp("127.0.0.1", 8080), "", "attacker.example:8080", 421},
		{"foreign name, no port", tcp("127.0.0.1", 8080), "", "attacker.example", 421},
		{"localhost, wrong port", tcp("127.0.0.1", 8080), "", "localhost:8081", 421},
		{"localhost, no port, not bound to 80", tcp("127.0.0.1", 8080), "", "localhost", 421},
		{"localhost, no port, bound to 80", tcp("127.0.0.1", 80), "", "localhost", 200},
		{"name ending in localhost", tcp("127.0.0.1", 8080), "", "evil-localhost:8080", 421},
		{"localhost subdomain of attacker", tcp("127.0.0.1", 8080), "", "localhost.attacker.example:8080", 421},
		{"empty", tcp("127.0.0.1", 8080), "", "", 421},
		{"foreign IP", tcp("127.0.0.1", 8080), "", "192.0.2.7:8080", 421},
		{"bound interface, no token: its own address", tcp("192.0.2.7", 8080), "", "192.0.2.7:8080", 200},
		{"unspecified, no token: loopback", tcp("0.0.0.0", 8080), "", "127.0.0.1:8080", 200},
		{"unspecified, no token: bound address as bound", tcp("0.0.0.0", 8080), "", "0.0.0.0:8080", 200},
		{"unspecified, no token: foreign name", tcp("0.0.0.0", 8080), "", "attacker.example:8080", 421},
		{"unspecified with token: foreign name", tcp("0.0.0.0", 8080), "s3cret-token", "attacker.example:8080", 421},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := Guard(Config{Name: "test", Bound: tc.bound, Token: tc.token}, ok)
			if err != nil {
				t.Fatal(err)
			}
			w := do(t, h, http.MethodGet, tc.host, "/?token="+tc.token, func(r *http.Request) { r.RemoteAddr = "192.0.2.9:4000" })
			if tc.bound.IP.IsLoopback() {
				w = do(t, h, http.MethodGet, tc.host, "/?token="+tc.token, nil)
			}
			if w.Code != tc.want {
				t.Fatalf("Host %q bound %s: %d %s, want %d", tc.host, tc.bound, w.Code, w.Body, tc.want)
			}
			if w.Code == http.StatusMisdirectedRequest && !strings.Contains(w.Body.String(), "localhost:"+"8080") {
				t.Errorf("the refusal does not say which Host values are accepted: %s", w.Body)
			}
		})
	}
}

// TestMachineAddressesNeedAToken: bound to every interface, the machine's own non-loopback
// address is accepted as Host only when a token is configured.
func TestMachineAddressesNeedAToken(t *testing.T) {
	ips, _ := machineAddrs()
	var own net.IP
	for _, ip := range ips {
		if !ip.IsLoopback() && ip.To4() != nil {
			own = ip
			break
		}
	}
	if own == nil {
		t.Skip("this machine has no non-loopback IPv4 address")
	}
	host := net.JoinHostPort(own.String(), "8080")
	for token, want := range map[string]int{"": 421, "s3cret-token": 200} {
		h, err := Guard(Config{Name: "test", Bound: tcp("0.0.0.0", 8080), Token: token}, ok)
		if err != nil {
			t.Fatal(err)
		}
		if w := do(t, h, http.MethodGet, host, "/?token="+token, nil); w.Code != want {
			t.Errorf("token %q, Host %s: %d, want %d", token, host, w.Code, want)
		}
	}
}

func TestLoopbackBindAnswersLoopbackClientsOnly(t *testing.T) {
	h, _ := Guard(Config{Name: "test", Bound: tcp("127.0.0.1", 8080)}, ok)
	if w := do(t, h, http.MethodGet, "127.0.0.1:8080", "/", func(r *http.Request) { r.RemoteAddr = "192.0.2.9:4000" }); w.Code != http.StatusForbidden {
		t.Errorf("a non-loopback client: %d", w.Code)
	}
}

func TestToken(t *testing.T) {
	const token = "0123456789abcdef"
	h, err := Guard(Config{Name: "test", Bound: tcp("127.0.0.1", 8080), Token: token}, ok)
	if err != nil {
		t.Fatal(err)
	}
	host := "127.0.0.1:8080"
	for _, tc := range []struct {
		name   string
		target string
		mod    func(*http.Request)
		want   int
	}{
		{"none", "/", nil, 401},
		{"wrong in URL", "/?token=0123456789abcdeX", nil, 401},
		{"a prefix in URL", "/?token=0123", nil, 401},
		{"empty in URL", "/?token=", nil, 401},
		{"wrong cookie", "/", func(r *http.Request) { r.AddCookie(&http.Cookie{Name: "loadproof_token_8080", Value: "nope"}) }, 401},
		{"another port's cookie", "/", func(r *http.Request) { r.AddCookie(&http.Cookie{Name: "loadproof_token_9090", Value: token}) }, 401},
		{"in URL", "/?token=" + token, nil, 200},
		{"cookie", "/", func(r *http.Request) { r.AddCookie(&http.Cookie{Name: "loadproof_token_8080", Value: token}) }, 200},
		{"bearer", "/", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := do(t, h, http.MethodGet, host, tc.target, tc.mod)
			if w.Code != tc.want {
				t.Fatalf("%d %s, want %d", w.Code, w.Body, tc.want)
			}
		})
	}
	// The first load sets the cookie the page's own requests carry, and the token does not reach
	// the handler (nor, through it, any link or log).
	w := do(t, h, http.MethodGet, host, "/flamegraph?si=cpu&token="+token, nil)
	if got := w.Body.String(); got != "ok si=cpu" {
		t.Errorf("the handler saw %q", got)
	}
	c := w.Result().Cookies()
	if len(c) != 1 || c[0].Value != token || !c[0].HttpOnly || c[0].SameSite != http.SameSiteStrictMode || c[0].Path != "/" {
		t.Errorf("cookie %+v; want HttpOnly, SameSite=Strict, Path=/", c)
	}
}

func TestHeaders(t *testing.T) {
	h, _ := Guard(Config{Name: "test", Bound: tcp("127.0.0.1", 8080), CSP: "default-src 'none'; connect-src 'self'"}, ok)
	for _, host := range []string{"127.0.0.1:8080", "attacker.example:8080"} {
		w := do(t, h, http.MethodGet, host, "/", nil)
		for k, want := range map[string]string{
			"X-Content-Type-Options":  "nosniff",
			"X-Frame-Options":         "DENY",
			"Referrer-Policy":         "no-referrer",
			"Content-Security-Policy": "default-src 'none'; connect-src 'self'; frame-ancestors 'none'",
		} {
			if got := w.Header().Get(k); got != want {
				t.Errorf("Host %s: %s = %q, want %q", host, k, got, want)
			}
		}
	}
	h, _ = Guard(Config{Name: "test", Bound: tcp("127.0.0.1", 8080)}, ok)
	if got := do(t, h, http.MethodGet, "127.0.0.1:8080", "/", nil).Header().Get("Content-Security-Policy"); got != DefaultCSP+"; frame-ancestors 'none'" {
		t.Errorf("default CSP %q", got)
	}
}

func TestCrossOriginWritesRefused(t *testing.T) {
	h, _ := Guard(Config{Name: "test", Bound: tcp("127.0.0.1", 8080)}, ok)
	w := do(t, h, http.MethodPost, "127.0.0.1:8080", "/saveconfig", func(r *http.Request) {
		r.Header.Set("Sec-Fetch-Site", "cross-site")
		r.Header.Set("Origin", "http://attacker.example")
	})
	if w.Code != http.StatusForbidden {
		t.Errorf("a cross-site POST: %d", w.Code)
	}
	w = do(t, h, http.MethodPost, "127.0.0.1:8080", "/saveconfig", func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", "same-origin") })
	if w.Code != http.StatusOK {
		t.Errorf("a same-origin POST: %d", w.Code)
	}
}

func TestNonLoopbackWarns(t *testing.T) {
	for _, tc := range []struct {
		bound *net.TCPAddr
		token string
		warn  string
	}{
		{tcp("127.0.0.1", 1), "", ""},
		{tcp("0.0.0.0", 1), "", "without a token"},
		{tcp("0.0.0.0", 1), "s3cret-token", "has the token"},
	} {
		var buf bytes.Buffer
		if _, err := Guard(Config{Name: "dashboard", Bound: tc.bound, Token: tc.token, Logger: slog.New(slog.NewTextHandler(&buf, nil))}, ok); err != nil {
			t.Fatal(err)
		}
		if tc.warn == "" && buf.Len() > 0 || tc.warn != "" && (!strings.Contains(buf.String(), "level=WARN") || !strings.Contains(buf.String(), tc.warn)) {
			t.Errorf("bound %s, token %q: log %q, want a warning with %q", tc.bound, tc.token, buf.String(), tc.warn)
		}
		if strings.Contains(buf.String(), "s3cret") {
			t.Errorf("the log holds the token: %s", buf.String())
		}
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		c  Config
		ok bool
	}{
		{Config{Bound: tcp("127.0.0.1", 1)}, true},
		{Config{Bound: tcp("127.0.0.1", 1), Token: "abc-DEF_123.~"}, true},
		{Config{}, false},
		{Config{Bound: &net.UnixAddr{Name: "x", Net: "unix"}}, false},
		{Config{Bound: tcp("127.0.0.1", 1), Token: "has space"}, false},
		{Config{Bound: tcp("127.0.0.1", 1), Token: "tab\t"}, false},
		{Config{Bound: tcp("127.0.0.1", 1), Token: "é"}, false},
		{Config{Bound: tcp("127.0.0.1", 1), Token: strings.Repeat("a", MaxTokenLen+1)}, false},
	} {
		if err := tc.c.Validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: %v", tc.c, err)
		}
	}
}

func TestWithToken(t *testing.T) {
	for _, tc := range [][3]string{
		{"http://127.0.0.1:1/", "", "http://127.0.0.1:1/"},
		{"http://127.0.0.1:1/", "a+b&c", "http://127.0.0.1:1/?token=a%2Bb%26c"},
		{"http://127.0.0.1:1/ui/", "t", "http://127.0.0.1:1/ui/?token=t"},
	} {
		if got := WithToken(tc[0], tc[1]); got != tc[2] {
			t.Errorf("WithToken(%q, %q) = %q, want %q", tc[0], tc[1], got, tc[2])
		}
	}
}

// FuzzHostAllowed: any Host header is judged without panicking, and one that is accepted names
// loopback or the bound address, with the bound port.
func FuzzHostAllowed(f *testing.F) {
	for _, s := range []string{"127.0.0.1:8080", "localhost:8080", "[::1]:8080", "attacker.example", "[::1", "::1", "[", ":8080", "localhost.:8080", "127.1:8080", "0x7f.1:8080"} {
		f.Add(s)
	}
	h, err := Guard(Config{Name: "fuzz", Bound: tcp("127.0.0.1", 8080)}, ok)
	if err != nil {
		f.Fatal(err)
	}
	g := h.(*guard)
	f.Fuzz(func(t *testing.T, host string) {
		if !g.hostAllowed(host) {
			return
		}
		name, port, err := net.SplitHostPort(host)
		if err != nil || port != "8080" {
			t.Fatalf("accepted %q: not the bound port", host)
		}
		name = strings.TrimSuffix(strings.ToLower(name), ".")
		if ip := net.ParseIP(name); name != "localhost" && (ip == nil || !ip.IsLoopback()) {
			t.Fatalf("accepted %q: not a loopback name", host)
		}
	})
}
