// Package remotewrite streams a run's per-second interval snapshots to a Prometheus remote-write
// endpoint (Remote-Write 1.0: snappy-compressed protobuf WriteRequest, Prometheus's own prompb
// types), as the run goes: operations by outcome class, failure causes, latency as a native
// histogram (or classic buckets), driver counters and server samples, every series labelled with
// the run ID, harness, command, phase and host.
//
// Delivery never slows the load: Observe only adds the interval to running totals and puts one
// request on a bounded queue; a sender goroutine delivers it with retries and backoff; a full queue
// drops the request and counts it. Stats say what was sent, dropped and failed.
package remotewrite

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/prompb"

	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/result"
)

// Histogram forms.
const (
	Native  = "native"
	Classic = "classic"
)

// Schema is the native histograms' bucket schema: 2^4 buckets per power of two, so a bucket's
// upper bound is 2^(1/16) ≈ 1.044 times its lower one (a quantile read from it is within 4.4 %).
const Schema = 4

// ClassicBounds are the classic histogram's upper bounds in seconds (and +Inf).
var ClassicBounds = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// Config is where and how to write.
type Config struct {
	URL        string
	Headers    map[string]string
	CAFile     string
	Histograms string // Native (default) or Classic
	// Labels are added to every series (run_id, harness, command, phase, host).
	Labels map[string]string
	// QueueLen bounds the requests waiting to be sent (default 60: a minute of intervals).
	QueueLen int
	// Timeout bounds one attempt (default 5 s); Retries is the attempts after the first (default 3).
	Timeout time.Duration
	Retries int
}

// Stats is what the writer did.
type Stats struct {
	Sent      int64  `json:"sent"`
	Dropped   int64  `json:"dropped"`
	Failed    int64  `json:"failed"`
	LastError string `json:"last_error,omitempty"`
}

// Writer streams intervals.
type Writer struct {
	cfg    Config
	client *http.Client
	labels []prompb.Label

	mu       sync.Mutex
	ops      map[string]int64
	causes   map[string]int64
	counters map[string]int64
	lat      map[string]*hist.Histogram
	stats    Stats
	closed   bool

	queue     chan []byte
	done      chan struct{}
	closeOnce sync.Once
	final     Stats
}

// maxHeaderText bounds a header flag.
const maxHeaderText = 8192

// ParseHeader reads "Name: value" (a --remote-write-header flag).
func ParseHeader(s string) (string, string, error) {
	if len(s) > maxHeaderText {
		return "", "", fmt.Errorf("remote-write header of %d bytes: at most %d", len(s), maxHeaderText)
	}
	name, value, ok := strings.Cut(s, ":")
	name, value = strings.TrimSpace(name), strings.TrimSpace(value)
	if !ok || name == "" {
		return "", "", fmt.Errorf("remote-write header %q: want 'Name: value'", clip(s))
	}
	for _, r := range name {
		if r <= ' ' || r >= 0x7f || strings.ContainsRune("()<>@,;:\\\"/[]?={}", r) {
			return "", "", fmt.Errorf("remote-write header name %q: not a valid HTTP header name", clip(name))
		}
	}
	for _, r := range value {
		if r == '\r' || r == '\n' || r == 0 {
			return "", "", fmt.Errorf("remote-write header %q: its value holds a line break or NUL", name)
		}
	}
	return name, value, nil
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// CheckURL accepts an http or https URL with a host.
func CheckURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("remote-write URL %q: %v", clip(raw), err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("remote-write URL %q: want http:// or https://HOST[:PORT]/PATH (Prometheus: /api/v1/write)", clip(raw))
	}
	if u.User != nil {
		return nil, errors.New("remote-write URL: credentials in the URL would be written into result files; give them with --remote-write-header 'Authorization: …'")
	}
	return u, nil
}

// New checks cfg and starts the sender.
func New(cfg Config) (*Writer, error) {
	if _, err := CheckURL(cfg.URL); err != nil {
		return nil, err
	}
	switch cfg.Histograms {
	case "":
		cfg.Histograms = Native
	case Native, Classic:
	default:
		return nil, fmt.Errorf("remote-write histograms %q: native or classic", cfg.Histograms)
	}
	if cfg.QueueLen <= 0 {
		cfg.QueueLen = 60
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.Retries < 0 {
		cfg.Retries = 0
	} else if cfg.Retries == 0 {
		cfg.Retries = 3
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("remote-write CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("remote-write CA %s: no PEM certificate in it", cfg.CAFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	w := &Writer{cfg: cfg, client: &http.Client{Transport: tr, Timeout: cfg.Timeout},
		ops: map[string]int64{}, causes: map[string]int64{}, counters: map[string]int64{}, lat: map[string]*hist.Histogram{},
		queue: make(chan []byte, cfg.QueueLen), done: make(chan struct{})}
	for _, k := range slices.Sorted(maps.Keys(cfg.Labels)) {
		if cfg.Labels[k] != "" {
			w.labels = append(w.labels, prompb.Label{Name: k, Value: cfg.Labels[k]})
		}
	}
	go w.send()
	return w, nil
}

// Observe adds one interval snapshot to the run's totals and queues the series as they stand. It
// never blocks: a full queue drops the request (counted).
func (w *Writer) Observe(iv *result.Interval) {
	now := time.Now()
	w.mu.Lock()
	for k, v := range iv.Counts {
		w.ops[k] += v
	}
	for k, v := range iv.Causes {
		w.causes[k] += v
	}
	for k, v := range iv.Counters {
		w.counters[k] += v
	}
	for k, h := range iv.Latency {
		if w.lat[k] == nil {
			w.lat[k] = hist.New()
		}
		w.lat[k].Merge(h)
	}
	req := w.request(now.UnixMilli(), iv.Server)
	if w.closed {
		w.stats.Dropped++ // an interval after the result was written: not delivered
		w.mu.Unlock()
		return
	}
	b, err := req.Marshal()
	if err != nil {
		w.stats.Failed++
		w.stats.LastError = err.Error()
		w.mu.Unlock()
		return
	}
	select {
	case w.queue <- snappy.Encode(nil, b):
	default:
		w.stats.Dropped++
	}
	w.mu.Unlock()
}

// request builds the write request of the totals so far (w.mu held).
func (w *Writer) request(ts int64, server map[string]float64) *prompb.WriteRequest {
	req := &prompb.WriteRequest{}
	sample := func(name string, v float64, extra ...prompb.Label) {
		req.Timeseries = append(req.Timeseries, prompb.TimeSeries{Labels: w.series(name, extra...), Samples: []prompb.Sample{{Value: v, Timestamp: ts}}})
	}
	for _, k := range slices.Sorted(maps.Keys(w.ops)) {
		sample("loadproof_operations_total", float64(w.ops[k]), prompb.Label{Name: "outcome", Value: k},
			prompb.Label{Name: "refused", Value: fmt.Sprint(result.IsRefusal(k))})
	}
	for _, k := range slices.Sorted(maps.Keys(w.causes)) {
		sample("loadproof_failure_causes_total", float64(w.causes[k]), prompb.Label{Name: "cause", Value: k})
	}
	for _, k := range slices.Sorted(maps.Keys(w.counters)) {
		sample("loadproof_driver_events_total", float64(w.counters[k]), prompb.Label{Name: "event", Value: k})
	}
	for _, k := range slices.Sorted(maps.Keys(server)) {
		if v := server[k]; !math.IsNaN(v) && !math.IsInf(v, 0) {
			sample("loadproof_server_sample", v, prompb.Label{Name: "name", Value: k})
		}
	}
	for _, k := range slices.Sorted(maps.Keys(w.lat)) {
		h := w.lat[k]
		kind := prompb.Label{Name: "kind", Value: k}
		if w.cfg.Histograms == Classic {
			bs := h.Buckets()
			var sum float64
			for _, b := range bs {
				sum += float64(b.Micros) / 1e6 * float64(b.Count)
			}
			for _, le := range ClassicBounds {
				var n int64
				for _, b := range bs {
					if float64(b.Micros)/1e6 <= le {
						n += b.Count
					}
				}
				sample("loadproof_latency_seconds_bucket", float64(n), kind, prompb.Label{Name: "le", Value: fmt.Sprint(le)})
			}
			sample("loadproof_latency_seconds_bucket", float64(h.Count()), kind, prompb.Label{Name: "le", Value: "+Inf"})
			sample("loadproof_latency_seconds_sum", sum, kind)
			sample("loadproof_latency_seconds_count", float64(h.Count()), kind)
			continue
		}
		nh := NativeHistogram(h)
		nh.Timestamp = ts
		req.Timeseries = append(req.Timeseries, prompb.TimeSeries{Labels: w.series("loadproof_latency_seconds", kind), Histograms: []prompb.Histogram{nh}})
	}
	return req
}

// series returns the labels of one series, sorted by name as remote write requires.
func (w *Writer) series(name string, extra ...prompb.Label) []prompb.Label {
	ls := append([]prompb.Label{{Name: "__name__", Value: name}}, w.labels...)
	ls = append(ls, extra...)
	slices.SortFunc(ls, func(a, b prompb.Label) int { return strings.Compare(a.Name, b.Name) })
	return ls
}

// NativeHistogram converts an HDR histogram (µs) to a native histogram in seconds at Schema: each
// HDR bucket's count goes to the native bucket holding its lowest value. The count is exact; the
// sum counts each sample at its HDR bucket's lowest value.
func NativeHistogram(h *hist.Histogram) prompb.Histogram {
	counts := map[int32]int64{}
	var sum float64
	var total int64
	for _, b := range h.Buckets() {
		v := float64(b.Micros) / 1e6
		if v <= 0 {
			v = 1e-6
		}
		counts[nativeIndex(v)] += b.Count
		sum += v * float64(b.Count)
		total += b.Count
	}
	idx := make([]int32, 0, len(counts))
	for i := range counts {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	nh := prompb.Histogram{Count: &prompb.Histogram_CountInt{CountInt: uint64(total)}, Sum: sum, Schema: Schema,
		ZeroCount: &prompb.Histogram_ZeroCountInt{ZeroCountInt: 0}}
	var prevCount int64
	for n, i := range idx {
		if n == 0 || i != idx[n-1]+1 {
			off := i
			if n > 0 {
				off = i - idx[n-1] - 1
			}
			nh.PositiveSpans = append(nh.PositiveSpans, prompb.BucketSpan{Offset: off, Length: 0})
		}
		nh.PositiveSpans[len(nh.PositiveSpans)-1].Length++
		nh.PositiveDeltas = append(nh.PositiveDeltas, counts[i]-prevCount)
		prevCount = counts[i]
	}
	return nh
}

// nativeIndex is the native bucket of v at Schema: bucket i holds (2^((i-1)/2^s), 2^(i/2^s)].
func nativeIndex(v float64) int32 {
	frac, exp := math.Frexp(v) // v = frac × 2^exp, frac in [0.5, 1)
	const n = 1 << Schema
	// log2(v) = exp + log2(frac); index = ceil(log2(v) × n).
	return int32(math.Ceil((float64(exp) + math.Log2(frac)) * n))
}

func (w *Writer) fail(err error) {
	w.mu.Lock()
	w.stats.Failed++
	w.stats.LastError = err.Error()
	w.mu.Unlock()
}

// send delivers queued requests, each with retries and backoff.
func (w *Writer) send() {
	defer close(w.done)
	for body := range w.queue {
		var err error
		backoff := 100 * time.Millisecond
		for attempt := 0; attempt <= w.cfg.Retries; attempt++ {
			if attempt > 0 {
				time.Sleep(backoff)
				backoff = min(backoff*2, 2*time.Second)
			}
			var retry bool
			if retry, err = w.post(body); err == nil || !retry {
				break
			}
		}
		if err != nil {
			w.fail(err)
			continue
		}
		w.mu.Lock()
		w.stats.Sent++
		w.mu.Unlock()
	}
}

// post sends one request; retry says whether a failure may pass on a later attempt.
func (w *Writer) post(body []byte) (retry bool, err error) {
	req, err := http.NewRequest(http.MethodPost, w.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Encoding", "snappy")
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	req.Header.Set("User-Agent", "loadproof")
	for k, v := range w.cfg.Headers {
		req.Header.Set(k, v)
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return true, err
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		return false, nil
	}
	err = fmt.Errorf("remote write: %s: %s", resp.Status, strings.TrimSpace(string(msg)))
	return resp.StatusCode/100 == 5 || resp.StatusCode == http.StatusTooManyRequests, err
}

// Close stops accepting intervals and waits, up to ctx, for the queue to drain; what is left is
// counted as dropped. It returns the writer's stats.
// Later calls return the first call's stats.
func (w *Writer) Close(ctx context.Context) Stats {
	w.closeOnce.Do(func() {
		w.mu.Lock()
		close(w.queue) // under mu: Observe sends under no lock, so it checks closed first
		w.closed = true
		w.mu.Unlock()
		select {
		case <-w.done:
		case <-ctx.Done():
			w.mu.Lock()
			w.stats.Dropped += int64(len(w.queue))
			w.mu.Unlock()
		}
		w.mu.Lock()
		w.final = w.stats
		w.mu.Unlock()
	})
	return w.final
}

// Endpoint is the URL without its query and fragment (which may carry a token): what a result
// file records.
func (w *Writer) Endpoint() string {
	u, err := url.Parse(w.cfg.URL)
	if err != nil {
		return ""
	}
	u.RawQuery, u.Fragment = "", ""
	return u.String()
}
