// Package localhttp guards the tool's own small web servers (the live dashboard and pprof's web UI
// behind `profile --serve`): they are meant for the person running the tool, usually on loopback,
// and a page on another origin must not be able to read them.
//
// Guard wraps a server's handler so that:
//
//   - a request whose Host is not one of the names the listener is really reached by is refused
//     with 421 Misdirected Request, naming the accepted Host values. That defeats DNS rebinding: a
//     foreign page whose name was re-pointed at 127.0.0.1 still sends its own name as Host.
//     Accepted: the bound address as bound, `localhost` and any loopback address, each with the
//     bound port (no port when it is 80). Bound to a non-loopback address (0.0.0.0, ::, an
//     interface address) and given a token, the machine's own interface addresses and host name
//     are accepted too; without a token only loopback names are, so the server is reached through
//     an SSH tunnel or from the machine itself.
//   - with a token configured, every request must carry it: `?token=` in the URL (the first load;
//     the guard then sets an HttpOnly, SameSite=Strict cookie for the page's own requests), that
//     cookie, or `Authorization: Bearer`. It is compared in constant time; a missing or wrong one
//     gets 401.
//   - a listener bound to loopback answers loopback clients only;
//   - unsafe cross-origin requests (a foreign page's POST) are refused (net/http's
//     CrossOriginProtection);
//   - every response carries X-Content-Type-Options: nosniff, X-Frame-Options: DENY,
//     Referrer-Policy: no-referrer and the server's Content-Security-Policy with frame-ancestors
//     'none'.
//
// A listener bound to a non-loopback address is reported on the log (a warning) when the guard
// is made. The package imports nothing of ours, so any server of the tool can use it.
package localhttp

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
)

// TokenParam is the URL query parameter that carries the token on a page's first load.
const TokenParam = "token"

// MaxTokenLen bounds a token: it travels in URLs and cookies.
const MaxTokenLen = 256

// DefaultCSP is the policy for a server that sends no pages of its own (text answers only).
const DefaultCSP = "default-src 'none'"

// Config describes a guarded server.
type Config struct {
	// Name prefixes the refusals' messages and the log lines ("dashboard", "pprof UI").
	Name string
	// Bound is the address the listener is bound to (its Addr()); its port is the only one
	// accepted in a Host header.
	Bound net.Addr
	// Token, when set, must come with every request (see the package comment). Printable ASCII
	// without spaces, at most MaxTokenLen bytes.
	Token string
	// CSP is the Content-Security-Policy header of every response; frame-ancestors 'none' is
	// added unless it names frame-ancestors. Empty means DefaultCSP.
	CSP string
	// Logger receives the warning about a non-loopback address; nil discards it.
	Logger *slog.Logger
}

// Validate reports a configuration the guard cannot enforce.
func (c Config) Validate() error {
	if _, ok := c.Bound.(*net.TCPAddr); !ok {
		return fmt.Errorf("localhttp: %s: the bound address %v is not a TCP address", c.Name, c.Bound)
	}
	if err := CheckToken(c.Token); err != nil {
		return fmt.Errorf("localhttp: %s: %w", c.Name, err)
	}
	return nil
}

// CheckToken reports a token the guard cannot use: longer than MaxTokenLen, or holding anything
// but printable ASCII without spaces. Empty means no token.
func CheckToken(t string) error {
	if len(t) > MaxTokenLen {
		return fmt.Errorf("the token is %d bytes; at most %d are accepted", len(t), MaxTokenLen)
	}
	for _, r := range t {
		if r <= ' ' || r > '~' {
			return fmt.Errorf("the token holds %q; use printable ASCII without spaces (for example `openssl rand -hex 16`)", r)
		}
	}
	return nil
}

// guard is the wrapping handler.
type guard struct {
	name      string
	port      int
	bound     net.IP
	loopback  bool // bound to a loopback address
	names     []string
	ips       []net.IP // interface addresses accepted (non-loopback bind with a token)
	tokenSum  [32]byte
	hasToken  bool
	cookie    string
	csp       string
	accepted  string // for the refusal's message
	next      http.Handler
	crossSite *http.CrossOriginProtection
}

// Guard wraps h as the package comment says. It logs a warning when the listener is bound to a
// non-loopback address.
func Guard(c Config, h http.Handler) (http.Handler, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ta := c.Bound.(*net.TCPAddr)
	g := &guard{name: c.Name, port: ta.Port, bound: ta.IP, loopback: ta.IP.IsLoopback(), next: h,
		crossSite: http.NewCrossOriginProtection(), cookie: "loadproof_token_" + strconv.Itoa(ta.Port)}
	if c.Token != "" {
		g.tokenSum, g.hasToken = sha256.Sum256([]byte(c.Token)), true
	}
	g.csp = c.CSP
	if g.csp == "" {
		g.csp = DefaultCSP
	}
	if !strings.Contains(g.csp, "frame-ancestors") {
		g.csp += "; frame-ancestors 'none'"
	}
	if !g.loopback && g.hasToken {
		g.ips, g.names = machineAddrs()
	}
	g.accepted = g.describe()
	if !g.loopback {
		if g.hasToken {
			log.Warn(c.Name+": listening on a non-loopback address; anyone who can reach it and has the token can read it",
				"addr", c.Bound.String(), "hosts", g.accepted)
		} else {
			log.Warn(c.Name+": listening on a non-loopback address without a token; it answers loopback Host names only "+
				"(reach it through an SSH tunnel), and a client that can reach the port can still send one: give a token to serve other hosts",
				"addr", c.Bound.String(), "hosts", g.accepted)
		}
	}
	return g, nil
}

// machineAddrs lists the machine's interface addresses and host name.
func machineAddrs() ([]net.IP, []string) {
	var ips []net.IP
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				ips = append(ips, n.IP)
			}
		}
	}
	var names []string
	if h, err := os.Hostname(); err == nil && h != "" {
		names = append(names, strings.ToLower(h))
	}
	return ips, names
}

// describe says which Host values are accepted.
func (g *guard) describe() string {
	p := ":" + strconv.Itoa(g.port)
	s := []string{"localhost" + p, "127.0.0.1" + p, "[::1]" + p}
	if !g.bound.IsLoopback() {
		s = append(s, net.JoinHostPort(g.bound.String(), strconv.Itoa(g.port)))
	}
	if len(g.ips) > 0 || len(g.names) > 0 {
		s = append(s, "this machine's addresses and host name"+p)
	}
	if g.port == 80 {
		s = append(s, "(the port may be left out)")
	}
	return strings.Join(s, ", ")
}

// hostAllowed reports whether a request's Host header names this server.
func (g *guard) hostAllowed(hostHeader string) bool {
	host, port, err := net.SplitHostPort(hostHeader)
	if err != nil {
		// No port: the scheme's default (http).
		host, port = hostHeader, "80"
		if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
			host = host[1 : len(host)-1]
		}
	}
	if p, err := strconv.Atoi(port); err != nil || p != g.port {
		return false
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" {
		return true
	}
	if ip := net.ParseIP(host); ip != nil {
		if ip.IsLoopback() || ip.Equal(g.bound) {
			return true
		}
		return slices.ContainsFunc(g.ips, ip.Equal)
	}
	return host != "" && slices.Contains(g.names, host)
}

// tokenOK reports whether the request carries the token, and whether it came in the URL.
func (g *guard) tokenOK(r *http.Request) (ok, fromURL bool) {
	match := func(t string) bool {
		s := sha256.Sum256([]byte(t))
		return subtle.ConstantTimeCompare(s[:], g.tokenSum[:]) == 1
	}
	if q := r.URL.Query(); q.Has(TokenParam) {
		return match(q.Get(TokenParam)), true
	}
	if t, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); found {
		return match(t), false
	}
	if c, err := r.Cookie(g.cookie); err == nil {
		return match(c.Value), false
	}
	return false, false
}

func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", g.csp)
	if !g.hostAllowed(r.Host) {
		http.Error(w, fmt.Sprintf("%s: Host %q is not this server; it answers Host %s", g.name, r.Host, g.accepted), http.StatusMisdirectedRequest)
		return
	}
	if g.loopback {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
			http.Error(w, g.name+": loopback clients only", http.StatusForbidden)
			return
		}
	}
	if g.hasToken {
		ok, fromURL := g.tokenOK(r)
		if !ok {
			http.Error(w, g.name+": this server needs its token: open the URL with ?token= that was printed when it started", http.StatusUnauthorized)
			return
		}
		if fromURL {
			// The page's own requests (its event stream, pprof's links and fetches) carry the cookie.
			http.SetCookie(w, &http.Cookie{Name: g.cookie, Value: r.URL.Query().Get(TokenParam), Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			q := r.URL.Query()
			q.Del(TokenParam)
			r2 := r.Clone(r.Context())
			r2.URL.RawQuery = q.Encode()
			r2.RequestURI = r2.URL.RequestURI()
			r = r2
		}
	}
	if err := g.crossSite.Check(r); err != nil {
		http.Error(w, g.name+": cross-origin request refused", http.StatusForbidden)
		return
	}
	g.next.ServeHTTP(w, r)
}

// WithToken adds the token to a URL as the guard expects it on a page's first load; an empty
// token leaves the URL as it is.
func WithToken(rawURL, token string) string {
	if token == "" {
		return rawURL
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return rawURL
	}
	q := u.Query()
	q.Set(TokenParam, token)
	u.RawQuery = q.Encode()
	return u.String()
}
