package keycastload

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/loadproof/loadproof/internal/keycast"
)

// fakeServer is a minimal stand-in for a Keycast server, for tests of the client and the run
// engine that need answers the reference server never gives (every status, odd bodies). The end-to-
// end tests use the reference server itself.
type fakeServer struct {
	*httptest.Server
	requests atomic.Int64
	// answer returns status and body for the n-th /api/nostr request (n from 0).
	answer func(n int64, r *http.Request, body []byte) (int, string)

	mu      sync.Mutex
	cookies []string // Cookie headers seen
	bodies  []string
	auths   map[string]int64
}

func newFakeServer(t *testing.T, answer func(n int64, r *http.Request, body []byte) (int, string), wrap ...func(http.Handler) http.Handler) *fakeServer {
	t.Helper()
	f := &fakeServer{answer: answer, auths: map[string]int64{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/nostr", func(w http.ResponseWriter, r *http.Request) {
		n := f.requests.Add(1) - 1
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.cookies = append(f.cookies, r.Header.Get("Cookie"))
		if len(f.bodies) < 100 {
			f.bodies = append(f.bodies, string(body))
		}
		f.auths[r.Header.Get("Authorization")]++
		f.mu.Unlock()
		st, b := 200, `{"result":"ok"}`
		if f.answer != nil {
			st, b = f.answer(n, r, body)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.WriteHeader(st)
		io.WriteString(w, b)
	})
	mux.HandleFunc("GET /api/metrics", func(w http.ResponseWriter, r *http.Request) {
		n := f.requests.Load()
		w.Header().Set("Content-Type", keycast.MetricsContentType)
		w.Write(keycast.AppendMetricsText(nil, func(name string) uint64 {
			switch name {
			case keycast.MetricHTTPRPCRequests, keycast.MetricHTTPRPCSuccess:
				return uint64(n)
			case keycast.MetricHTTPRPCCacheHits:
				return uint64(max(n-1, 0))
			case keycast.MetricHTTPRPCCacheMisses, keycast.MetricHTTPRPCCacheSize:
				return uint64(min(n, 1))
			}
			return 0
		}))
	})
	var h http.Handler = mux
	for _, w := range wrap {
		h = w(h)
	}
	f.Server = httptest.NewServer(h)
	t.Cleanup(f.Close)
	return f
}

// testUsers makes n users with distinct tokens and valid-looking pubkeys.
func testUsers(n int) []keycast.TestUser {
	us := make([]keycast.TestUser, n)
	for i := range us {
		us[i] = keycast.TestUser{
			Pubkey:    strings.Repeat(fmt.Sprintf("%02x", i%256), 32),
			Email:     fmt.Sprintf("u%d@test.local", i),
			UcanToken: fmt.Sprintf("token-%d", i),
		}
	}
	return us
}
