package keycastserver

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/machine"
)

// BenchmarkSchnorrSign is the bound sign_event is measured against: one BIP-340 signature of a
// 32-byte id with fresh aux randomness, exactly what the server does per sign_event.
// It also reports cpu-ns/op, the process CPU time per signature, which stays meaningful when
// other work shares the cores and wall-clock ns/op does not.
func BenchmarkSchnorrSign(b *testing.B) {
	s := keycast.NewSigner(keycast.MustGenerateSecretKey())
	msg := sha256.Sum256([]byte("keycast"))
	b.ReportAllocs()
	cpu0 := processCPU()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.SignRandom(msg); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
}

// BenchmarkSchnorrSignColdCache is the bound's signature after other work has run through the
// cache: before each signature it writes one byte per 64-byte line of an evict-sized buffer (what
// a server's sockets, buffers and other connections do between two signatures). The evict-only
// sub-benchmarks time that sweep alone; a signature's cost with a cold cache is the difference.
// Run it with -cpu 1 on one pinned core (docs/benchmarks.md, Keycast server).
func BenchmarkSchnorrSignColdCache(b *testing.B) {
	s := keycast.NewSigner(keycast.MustGenerateSecretKey())
	msg := sha256.Sum256([]byte("keycast"))
	sweep := make([]byte, 4<<20)
	for _, size := range []int{0, 256 << 10, 1 << 20, 4 << 20} {
		for _, sign := range []bool{true, false} {
			name := fmt.Sprintf("evict=%dKiB/sign", size>>10)
			if !sign {
				name = fmt.Sprintf("evict=%dKiB/evict-only", size>>10)
			}
			b.Run(name, func(b *testing.B) {
				cpu0 := processCPU()
				for i := 0; i < b.N; i++ {
					for j := 0; j < size; j += 64 {
						sweep[j]++
					}
					if sign {
						if _, err := s.SignRandom(msg); err != nil {
							b.Fatal(err)
						}
					}
				}
				b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// processCPU is the user+system CPU time of this process in nanoseconds.
func processCPU() int64 { return int64(machine.ProcessCPU()) }

// BenchmarkSignEventWork is sign_event without HTTP: parse the load tool's event, policy check,
// id, signature, result JSON.
func BenchmarkSignEventWork(b *testing.B) {
	s := keycast.NewSigner(keycast.MustGenerateSecretKey())
	body, _ := keycast.AppendRPCBody(nil, keycast.MethodSignEvent, s.Public().Hex(), time.Now().Unix(), "")
	call, err := parseRPC(body)
	if err != nil {
		b.Fatal(err)
	}
	perms := []keycast.Permission{}
	if p, ok := keycast.ParsePermission("allowed_kinds_social_messaging", []byte(`{"allowed_kinds":[0,1,3,4,7,44,1059,9735,22242]}`)); ok {
		perms = append(perms, p)
	}
	b.ReportAllocs()
	cpu0 := processCPU()
	defer func() { b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op") }()
	b.RunParallel(func(pb *testing.PB) {
		var buf []byte
		for pb.Next() {
			c, err := parseRPC(body)
			if err != nil {
				b.Fatal(err)
			}
			ev, err := parseEventFor(c.params[0], s.Public().Hex())
			if err != nil || !keycast.AllowSign(perms, ev.Kind, ev.Content) {
				b.Fatal(err)
			}
			signed, err := keycast.SignEvent(s, ev)
			if err != nil {
				b.Fatal(err)
			}
			buf = signed.AppendJSON(append(buf[:0], `{"result":`...))
		}
	})
	_ = call
}

// discardWriter is a minimal ResponseWriter so the benchmark measures the handler, not a
// recorder.
type discardWriter struct {
	h      http.Header
	status int
	n      int
}

func (w *discardWriter) Header() http.Header { return w.h }
func (w *discardWriter) WriteHeader(s int)   { w.status = s }
func (w *discardWriter) Write(p []byte) (int, error) {
	w.n += len(p)
	return len(p), nil
}

type rewindBody struct{ *bytes.Reader }

func (rewindBody) Close() error { return nil }

// BenchmarkGetPublicKeyHandler is the warm get_public_key path through the server's handler
// (cache hit), without sockets.
func BenchmarkGetPublicKeyHandler(b *testing.B) {
	benchHandler(b, func(string) []byte { return []byte(`{"method":"get_public_key","params":[]}`) })
}

// BenchmarkSignEventHandler is the warm sign_event path through the handler, without sockets.
func BenchmarkSignEventHandler(b *testing.B) {
	benchHandler(b, func(pub string) []byte {
		body, _ := keycast.AppendRPCBody(nil, keycast.MethodSignEvent, pub, time.Now().Unix(), "")
		return body
	})
}

func benchHandler(b *testing.B, body func(pub string) []byte) {
	s, base := startInternal(b, Config{})
	tok, pub := grantToken(b, base)
	payload := body(pub)
	h := s.Handler()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	defer func() { b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op") }()
	b.RunParallel(func(pb *testing.PB) {
		rd := bytes.NewReader(payload)
		req, _ := http.NewRequest("POST", base+keycast.PathNostr, rewindBody{rd})
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+tok)
		req.ContentLength = int64(len(payload))
		w := &discardWriter{h: http.Header{}}
		for pb.Next() {
			rd.Reset(payload)
			clear(w.h)
			h.ServeHTTP(w, req)
			if w.status != 200 {
				b.Fatalf("status %d", w.status)
			}
		}
	})
}

// BenchmarkRequestHead is the fast path's work on a request head as wrk and the load tool send
// it (a bearer token of about 600 bytes): parsed in full, and answered from the connection's
// memo of the last head.
func BenchmarkRequestHead(b *testing.B) {
	s := &Server{cfg: Config{}.withDefaults()}
	head := []byte("POST /api/nostr HTTP/1.1\r\nHost: 127.0.0.1:3000\r\nAuthorization: Bearer " +
		strings.Repeat("eyJhbGciOiJFUzI1NksiLCJ0eXAiOiJKV1QifQ.", 16) +
		"\r\nContent-Type: application/json\r\nContent-Length: 145\r\n\r\n")
	b.Run("parse", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := s.parseHead(head); !ok {
				b.Fatal("refused")
			}
		}
	})
	b.Run("memo", func(b *testing.B) {
		var m headMemo
		m.parse(s, head)
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := m.parse(s, head); !ok {
				b.Fatal("refused")
			}
		}
	})
}
