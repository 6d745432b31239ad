package keycastserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/loadproof/loadproof/internal/textclip"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loadproof/loadproof/internal/httpwire"
	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/keycaststore"
)

// Preallocated header values: assigning a shared slice to the header map costs no allocation.
var (
	hvJSON       = []string{"application/json"}
	hvText       = []string{"text/plain; charset=utf-8"}
	hvNosniff    = []string{"nosniff"}
	hvStar       = []string{"*"}
	hvRetryOne   = []string{"1"}
	hvNoStore    = []string{"no-store"}
	hvTrue       = []string{"true"}
	hvVaryOrigin = []string{"Origin"}
	hvMethods    = []string{"GET, POST, OPTIONS"}
	hvMaxAge     = []string{"86400"}
)

// admissionBody is the exact shedding body of the capacity contract.
var admissionBody = keycast.AppendErrorJSON(nil, keycast.AdmissionRejectedMessage, keycast.CodeAdmissionRejected)

// routes builds the handler. /api/nostr is dispatched before the mux: it is the hot path.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+keycast.PathRegister, s.restricted(s.withTenant(s.serveRegister)))
	mux.HandleFunc("OPTIONS "+keycast.PathRegister, s.restricted(nil))
	mux.HandleFunc("POST "+keycast.PathLogin, s.restricted(s.withTenant(s.serveLogin)))
	mux.HandleFunc("OPTIONS "+keycast.PathLogin, s.restricted(nil))
	mux.HandleFunc("POST /api/user/sessions/revoke", s.restricted(s.withTenant(s.serveRevoke)))
	mux.HandleFunc("OPTIONS /api/user/sessions/revoke", s.restricted(nil))
	mux.HandleFunc("POST "+keycast.PathAuthorize, s.permissive(s.withTenant(s.serveAuthorize)))
	mux.HandleFunc("POST "+keycast.PathToken, s.permissive(s.withTenant(s.serveToken)))
	mux.HandleFunc("OPTIONS /api/oauth/", s.permissive(nil))
	mux.HandleFunc("GET "+keycast.PathMetrics, s.permissive(s.serveMetrics))
	mux.HandleFunc("OPTIONS "+keycast.PathMetrics, s.permissive(nil))
	mux.HandleFunc("GET "+keycast.PathPolicies, s.servePolicies)
	mux.HandleFunc("GET "+keycast.PathHealth, serveEmpty)
	mux.HandleFunc("GET "+keycast.PathStartup, serveEmpty)
	mux.HandleFunc("GET "+keycast.PathReady, s.serveReady)
	nostr := s.permissive(s.serveNostr)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == keycast.PathNostr {
			switch r.Method {
			case http.MethodPost, http.MethodOptions:
				nostr(w, r)
			default:
				w.Header()["Allow"] = []string{"POST, OPTIONS"}
				http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
			}
			return
		}
		mux.ServeHTTP(w, r)
	})
}

func serveEmpty(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }

func (s *Server) serveReady(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*s.cfg.QueueTimeout+time.Second)
	defer cancel()
	if err := s.store.Ping(ctx); err != nil {
		s.log.Warn("readiness check failed", "err", err)
		writeError(w, http.StatusServiceUnavailable, keycast.MsgDatabaseUnavailable, "")
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (s *Server) servePolicies(w http.ResponseWriter, _ *http.Request) {
	w.Header()["Content-Type"] = hvJSON
	w.WriteHeader(http.StatusOK)
	w.Write(s.policyList)
}

// permissive is tower-http's permissive CORS: any origin, no credentials. A preflight (OPTIONS)
// is answered here; next nil means the route only exists for preflights.
func (s *Server) permissive(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, ok := r.Header["Origin"]; ok {
			h := w.Header()
			h["Access-Control-Allow-Origin"] = hvStar
			if r.Method == http.MethodOptions {
				preflight(h, r)
				w.WriteHeader(http.StatusOK)
				return
			}
		}
		if r.Method == http.MethodOptions || next == nil {
			w.WriteHeader(http.StatusOK)
			return
		}
		next(w, r)
	}
}

// restricted is the register/login CORS: ALLOWED_ORIGINS plus any http://localhost:* origin,
// with credentials. Other origins get no CORS headers (the browser then refuses the answer).
func (s *Server) restricted(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h["Vary"] = hvVaryOrigin
		if origin := r.Header.Get("Origin"); origin != "" && s.originAllowed(origin) {
			h["Access-Control-Allow-Origin"] = []string{origin}
			h["Access-Control-Allow-Credentials"] = hvTrue
			if r.Method == http.MethodOptions {
				preflight(h, r)
			}
		}
		if r.Method == http.MethodOptions || next == nil {
			w.WriteHeader(http.StatusOK)
			return
		}
		next(w, r)
	}
}

func preflight(h http.Header, r *http.Request) {
	h["Access-Control-Allow-Methods"] = hvMethods
	if req := r.Header.Get("Access-Control-Request-Headers"); req != "" {
		h["Access-Control-Allow-Headers"] = []string{req}
	}
	h["Access-Control-Max-Age"] = hvMaxAge
}

func (s *Server) originAllowed(origin string) bool {
	if s.allowedOrigins[strings.TrimSuffix(origin, "/")] {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && u.Scheme == "http" && u.Hostname() == "localhost"
}

// ---- tenants ----

// maxCachedTenants bounds the tenant cache; past it, new domains are looked up every time, so a
// flood of made-up Host headers cannot grow memory.
const maxCachedTenants = 4096

// errUnknownTenant: the Host names no tenant and the server creates no more (MaxTenants).
var errUnknownTenant = errors.New("keycastserver: unknown tenant")

type tenantCache struct {
	store keycaststore.Store
	max   int64    // most tenant rows the server creates up to (Config.MaxTenants)
	m     sync.Map // domain -> int64
	n     atomic.Int64

	createMu sync.Mutex
	full     atomic.Bool // the table reached max; tenants are never deleted
}

func newTenantCache(st keycaststore.Store, max int) *tenantCache {
	return &tenantCache{store: st, max: int64(max)}
}

// resolve returns the tenant id of a domain. Keycast creates a tenant for any Host it sees;
// here a domain without a tenant is created only while the tenants table holds fewer than max
// rows, so made-up Host headers cannot grow the database (errUnknownTenant past that). Known
// domains are cached, so a request costs no database work.
func (c *tenantCache) resolve(ctx context.Context, domain string) (int64, error) {
	if v, ok := c.m.Load(domain); ok {
		return v.(int64), nil
	}
	t, err := c.store.TenantByDomain(ctx, domain)
	if errors.Is(err, keycaststore.ErrNotFound) {
		t, err = c.create(ctx, domain)
	}
	if err != nil {
		return 0, err
	}
	if c.n.Load() < maxCachedTenants {
		if _, loaded := c.m.LoadOrStore(domain, t.ID); !loaded {
			c.n.Add(1)
		}
	}
	return t.ID, nil
}

// create adds a tenant for domain if the table has room. Creations are serialised and the rows
// counted each time (rare: at most max times), so the bound holds across restarts.
func (c *tenantCache) create(ctx context.Context, domain string) (keycaststore.Tenant, error) {
	if c.full.Load() {
		return keycaststore.Tenant{}, errUnknownTenant
	}
	c.createMu.Lock()
	defer c.createMu.Unlock()
	n, err := c.store.CountTenants(ctx)
	if err != nil {
		return keycaststore.Tenant{}, err
	}
	if n >= c.max {
		c.full.Store(true)
		// Another request may have created this very domain just before the limit.
		if t, err := c.store.TenantByDomain(ctx, domain); err == nil || !errors.Is(err, keycaststore.ErrNotFound) {
			return t, err
		}
		return keycaststore.Tenant{}, errUnknownTenant
	}
	return c.store.EnsureTenant(ctx, domain, domain)
}

// tenantDomain is the Host header without its port, lower-cased, checked for shape.
func tenantDomain(host string) (string, error) {
	if host == "" {
		return "", errors.New(keycast.MsgMissingHost)
	}
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	h = strings.ToLower(h)
	if h == "" || len(h) > 253 {
		return "", fmt.Errorf("Invalid domain: %q", textclip.String(host, 80))
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == ':' || c == '_') {
			return "", fmt.Errorf("Invalid domain: %q", textclip.String(host, 80))
		}
	}
	return h, nil
}

type tenantHandler func(w http.ResponseWriter, r *http.Request, tenantID int64)

// withTenant resolves the request tenant from Host: 400 plain text when it is missing,
// malformed or unknown past MaxTenants, 500 plain text when the database fails (Keycast's
// TenantExtractor).
func (s *Server) withTenant(next tenantHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		domain, err := tenantDomain(r.Host)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		id, err := s.tenants.resolve(r.Context(), domain)
		if errors.Is(err, errUnknownTenant) {
			http.Error(w, "Unknown tenant: "+strconv.Quote(domain)+" is not a tenant of this server, and it creates no more"+
				" (KEYCAST_MAX_TENANTS="+strconv.Itoa(s.cfg.MaxTenants)+" reached)", http.StatusBadRequest)
			return
		}
		if err != nil {
			s.log.Error("resolving tenant failed", "domain", domain, "err", err)
			http.Error(w, "Failed to resolve tenant", http.StatusInternalServerError)
			return
		}
		next(w, r, id)
	}
}

// ---- bodies ----

// bodyError is a request-body problem with axum's status and a plain-text message.
type bodyError struct {
	status int
	msg    string
}

func (e *bodyError) Error() string { return e.msg }

// jsonContentType reports whether the request declares JSON (application/json, optionally with
// parameters, or application/*+json), as axum's Json extractor requires.
func jsonContentType(r *http.Request) bool {
	ct := r.Header["Content-Type"]
	return len(ct) > 0 && httpwire.IsJSONMediaType([]byte(ct[0]))
}

var bodyPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// readBody reads at most limit bytes into a pooled buffer; the caller returns it with
// putBody. Bigger bodies give 413.
func readBody(r *http.Request, limit int64) (*[]byte, error) {
	if r.ContentLength > limit {
		return nil, &bodyError{http.StatusRequestEntityTooLarge, "Failed to buffer the request body: length limit exceeded (" + strconv.FormatInt(limit, 10) + " bytes)"}
	}
	bp := bodyPool.Get().(*[]byte)
	b := (*bp)[:0]
	if r.ContentLength > 0 && int64(cap(b)) < r.ContentLength {
		b = make([]byte, 0, r.ContentLength)
	}
	for {
		if len(b) == cap(b) {
			if int64(len(b)) > limit {
				break
			}
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Body.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			*bp = b
			putBody(bp)
			return nil, &bodyError{http.StatusBadRequest, "Failed to buffer the request body: " + err.Error()}
		}
	}
	*bp = b
	if int64(len(b)) > limit {
		putBody(bp)
		return nil, &bodyError{http.StatusRequestEntityTooLarge, "Failed to buffer the request body: length limit exceeded (" + strconv.FormatInt(limit, 10) + " bytes)"}
	}
	return bp, nil
}

func putBody(bp *[]byte) {
	if cap(*bp) <= 64<<10 {
		*bp = (*bp)[:0]
		bodyPool.Put(bp)
	}
}

// decodeJSON reads a JSON body into v with axum's statuses: 415 for a missing or wrong
// Content-Type, 413 past the limit, 400 for a syntax error, 422 for the wrong shape. required
// names top-level fields that must be present.
func (s *Server) decodeJSON(r *http.Request, v any, required ...string) error {
	if !jsonContentType(r) {
		return &bodyError{http.StatusUnsupportedMediaType, "Expected request with `Content-Type: application/json`"}
	}
	bp, err := readBody(r, s.cfg.BodyLimit)
	if err != nil {
		return err
	}
	defer putBody(bp)
	return decodeJSONBytes(*bp, v, required...)
}

// decodeJSONBytes is decodeJSON's body part, separate for fuzzing.
func decodeJSONBytes(b []byte, v any, required ...string) error {
	if !json.Valid(b) {
		return &bodyError{http.StatusBadRequest, "Failed to parse the request body as JSON: " + jsonErr(json.Unmarshal(b, new(any)))}
	}
	if bytes.IndexByte(b, '\\') >= 0 {
		if p := surrogateProblem(b); p != "" {
			return &bodyError{http.StatusBadRequest, "Failed to parse the request body as JSON: " + p}
		}
	}
	trimmed := bytes.TrimSpace(b)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return &bodyError{http.StatusUnprocessableEntity, "Failed to deserialize the JSON body into the target type: expected a JSON object"}
	}
	if len(required) > 0 {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(b, &fields); err != nil {
			return &bodyError{http.StatusUnprocessableEntity, "Failed to deserialize the JSON body into the target type: " + jsonErr(err)}
		}
		for _, f := range required {
			if raw, ok := fields[f]; !ok || string(raw) == "null" {
				return &bodyError{http.StatusUnprocessableEntity, "Failed to deserialize the JSON body into the target type: missing field `" + f + "`"}
			}
		}
	}
	if err := json.Unmarshal(b, v); err != nil {
		return &bodyError{http.StatusUnprocessableEntity, "Failed to deserialize the JSON body into the target type: " + jsonErr(err)}
	}
	return nil
}

func jsonErr(err error) string {
	if err == nil {
		return "unexpected end of input"
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// writeBodyError answers a body problem in plain text, as axum's rejections do.
func writeBodyError(w http.ResponseWriter, err error) {
	var be *bodyError
	if errors.As(err, &be) {
		http.Error(w, be.msg, be.status)
		return
	}
	http.Error(w, err.Error(), http.StatusBadRequest)
}

// ---- answers ----

func writeRaw(w http.ResponseWriter, status int, body []byte) {
	w.Header()["Content-Type"] = hvJSON
	w.WriteHeader(status)
	w.Write(body)
}

// writeError answers {"error":msg} or {"error":msg,"code":code}.
func writeError(w http.ResponseWriter, status int, msg, code string) {
	var buf [256]byte
	writeRaw(w, status, keycast.AppendErrorJSON(buf[:0], msg, code))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	writeRaw(w, status, mustJSON(v))
}

func mustJSON(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(fmt.Sprintf("keycastserver: encoding %T: %v", v, err))
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// writeAdmissionRejected is the shedding answer: 503, Retry-After: 1, the fixed body.
func writeAdmissionRejected(w http.ResponseWriter) {
	h := w.Header()
	h["Retry-After"] = hvRetryOne
	h["Cache-Control"] = hvNoStore
	writeRaw(w, http.StatusServiceUnavailable, admissionBody)
}

func queryEscape(s string) string { return url.QueryEscape(s) }
