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
	"unicode/utf8"

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
	// Every is the least time between two requests (default 1 s): intervals that close sooner (a
	// short run's 100 ms snapshots) add to the totals, and the next request carries them. Flush,
	// SetPhase and Close always send what is not yet sent.
	Every time.Duration
}

// Stats is what the writer did.
type Stats struct {
	Sent    int64 `json:"sent"`
	Dropped int64 `json:"dropped"`
	Failed  int64 `json:"failed"`
	// Pending is the requests queued or in flight, neither confirmed nor failed yet (a Flush or
	// Close whose wait ran out).
	Pending   int64  `json:"pending,omitempty"`
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
	gauges   map[string]int64
	server   map[string]float64
	lat      map[string]*hist.Histogram
	workers  map[int]*workerTotals // a coordinated run's per-worker totals, by worker index
	stats    Stats
	closed   bool
	phase    string
	base     Stats     // the stats when the phase began
	last     time.Time // when the last request was queued
	pending  bool      // totals changed since the last request
	inflight int64     // requests queued or being sent

	queue     chan item
	closing   sync.RWMutex // Flush's marker send holds it shared; Close closes the queue holding it
	done      chan struct{}
	closeOnce sync.Once
	final     Stats
}

// workerTotals are one worker's own totals in a coordinated run.
type workerTotals struct {
	name    string
	ops     map[string]int64
	held    int64
	hasHeld bool
}

// maxWorkers bounds the per-worker series a run writes (a coordinator refuses more workers long
// before this).
const maxWorkers = 4096

// ObserveWorker adds one worker's own interval snapshot of a coordinated run to that worker's
// totals: the next request carries them as loadproof_worker_operations_total and
// loadproof_worker_connections_held with worker="INDEX" and worker_host="NAME", beside the merged
// series (which count each operation once; the per-worker ones split them by load machine). It
// queues nothing itself and never blocks.
func (w *Writer) ObserveWorker(index int, name string, iv *result.Interval) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || index < 0 || index >= maxWorkers {
		return
	}
	wt := w.workers[index]
	if wt == nil {
		wt = &workerTotals{name: name, ops: map[string]int64{}}
		w.workers[index] = wt
	}
	for k, v := range iv.Counts {
		wt.ops[k] += v
	}
	if v, ok := iv.Gauges[HeldGauge]; ok {
		wt.held, wt.hasHeld = v, true
	}
	w.pending = true
}

// item is one queued request, or (ack set, body nil) a marker the sender closes when every request
// queued before it has been delivered or has failed.
type item struct {
	body []byte
	ack  chan struct{}
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
	if cfg.Every <= 0 {
		cfg.Every = time.Second
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
		queue: make(chan item, cfg.QueueLen), done: make(chan struct{})}
	w.reset()
	w.phase = cfg.Labels["phase"]
	for _, k := range slices.Sorted(maps.Keys(cfg.Labels)) {
		if cfg.Labels[k] != "" && k != "phase" {
			w.labels = append(w.labels, prompb.Label{Name: k, Value: cfg.Labels[k]})
		}
	}
	go w.send()
	return w, nil
}

// Observe adds one interval snapshot to the run's totals and, at most once per Config.Every,
// queues the series as they stand. It never blocks: a full queue drops the request (counted).
func (w *Writer) Observe(iv *result.Interval) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		w.stats.Dropped++ // an interval after the result was written: not delivered
		return
	}
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
	if iv.Server != nil {
		w.server = maps.Clone(iv.Server)
	}
	if iv.Gauges != nil {
		w.gauges = maps.Clone(iv.Gauges)
	}
	w.pending = true
	if now.Sub(w.last) >= w.cfg.Every {
		w.enqueue(now)
	}
}

// enqueue queues the totals as they stand (w.mu held), dropping them when the queue is full.
func (w *Writer) enqueue(now time.Time) {
	w.last, w.pending = now, false
	b, err := w.request(now.UnixMilli()).Marshal()
	if err != nil {
		w.stats.Failed++
		w.stats.LastError = err.Error()
		return
	}
	select {
	case w.queue <- item{body: snappy.Encode(nil, b)}:
		w.inflight++
	default:
		w.stats.Dropped++
	}
}

// reset starts the totals from zero (w.mu held).
func (w *Writer) reset() {
	w.ops, w.causes, w.counters, w.lat = map[string]int64{}, map[string]int64{}, map[string]int64{}, map[string]*hist.Histogram{}
	w.gauges, w.server = nil, nil
	w.workers = map[int]*workerTotals{}
	w.pending = false
}

// SetPhase ends the current phase and starts the next: what the current one has not yet sent is
// queued, and the series that follow carry phase=name and count from zero, so each phase's
// counters count that phase's operations (a sum over phases counts every one once). PhaseStats
// then counts this phase's requests only.
func (w *Writer) SetPhase(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || name == w.phase {
		return
	}
	if w.pending {
		w.enqueue(time.Now())
	}
	w.phase = name
	w.reset()
	w.base = w.stats
}

// Flush queues what is not yet sent and waits, up to ctx, until every request queued so far has
// been delivered or has failed. It does not close the writer: a capacity plan flushes at the end
// of each phase, so the phase's result file says what reached the endpoint. It returns PhaseStats.
func (w *Writer) Flush(ctx context.Context) Stats {
	ack := make(chan struct{})
	w.closing.RLock()
	defer w.closing.RUnlock()
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return w.PhaseStats()
	}
	if w.pending {
		w.enqueue(time.Now())
	}
	w.mu.Unlock()
	select { // the marker waits for room: Flush is called between phases, never in the load path
	case w.queue <- item{ack: ack}:
		select {
		case <-ack:
		case <-ctx.Done():
		}
	case <-ctx.Done():
	}
	return w.PhaseStats()
}

// PhaseStats is what the writer did since the current phase began (since New without phases).
func (w *Writer) PhaseStats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return Stats{Sent: w.stats.Sent - w.base.Sent, Dropped: w.stats.Dropped - w.base.Dropped, Failed: w.stats.Failed - w.base.Failed,
		Pending: w.inflight, LastError: w.stats.LastError}
}

// request builds the write request of the totals so far (w.mu held).
func (w *Writer) request(ts int64) *prompb.WriteRequest {
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
	for _, k := range slices.Sorted(maps.Keys(w.gauges)) {
		switch stream, ok := strings.CutSuffix(k, StreamSep+HeldGauge); {
		case k == HeldGauge:
			sample("loadproof_connections_held", float64(w.gauges[k]))
		case ok && stream != "":
			sample("loadproof_connections_held", float64(w.gauges[k]), prompb.Label{Name: "stream", Value: stream})
		default:
			sample("loadproof_driver_gauge", float64(w.gauges[k]), prompb.Label{Name: "name", Value: k})
		}
	}
	for _, i := range slices.Sorted(maps.Keys(w.workers)) {
		wt := w.workers[i]
		id := []prompb.Label{{Name: "worker", Value: fmt.Sprint(i)}, {Name: "worker_host", Value: wt.name}}
		for _, k := range slices.Sorted(maps.Keys(wt.ops)) {
			sample("loadproof_worker_operations_total", float64(wt.ops[k]), append(slices.Clone(id), prompb.Label{Name: "outcome", Value: k},
				prompb.Label{Name: "refused", Value: fmt.Sprint(result.IsRefusal(k))})...)
		}
		if wt.hasHeld {
			sample("loadproof_worker_connections_held", float64(wt.held), id...)
		}
	}
	server := w.server
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
	if w.phase != "" {
		ls = append(ls, prompb.Label{Name: "phase", Value: w.phase})
	}
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
	w.inflight--
	w.stats.Failed++
	w.stats.LastError = err.Error()
	w.mu.Unlock()
}

// send delivers queued requests, each with retries and backoff.
func (w *Writer) send() {
	defer close(w.done)
	for it := range w.queue {
		if it.ack != nil {
			close(it.ack) // every request queued before the marker is done
			continue
		}
		body := it.body
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
		w.inflight--
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
// counted as pending. It returns the writer's stats over the whole run.
// Later calls return the first call's stats.
func (w *Writer) Close(ctx context.Context) Stats {
	w.closeOnce.Do(func() {
		w.closing.Lock()
		w.mu.Lock()
		if w.pending {
			w.enqueue(time.Now())
		}
		close(w.queue) // under mu: Observe queues under it and checks closed first
		w.closed = true
		w.mu.Unlock()
		w.closing.Unlock()
		select {
		case <-w.done:
		case <-ctx.Done():
		}
		w.mu.Lock()
		w.final = w.stats
		w.final.Pending = w.inflight // not confirmed when the wait ran out
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

// HeldGauge is the gauge the LinkKeys drivers name the connections held (linkkeysresult.GaugeHeld):
// it is written as loadproof_connections_held, a combined run's stream's (STREAM/held,
// linkkeysresult.StreamSep) with stream="STREAM"; other gauges as loadproof_driver_gauge{name}.
const (
	HeldGauge = "held"
	StreamSep = "/"
)

// reservedLabels are the labels loadproof sets itself (and Prometheus's own): a --remote-write-label
// may not name them.
var reservedLabels = map[string]bool{"run_id": true, "harness": true, "command": true, "host": true, "outcome": true,
	"kind": true, "cause": true, "event": true, "name": true, "le": true, "refused": true, "stream": true, "worker": true, "worker_host": true, "job": true, "instance": true}

// maxLabelText bounds a label flag; MaxLabels bounds how many a run adds.
const (
	maxLabelText = 1024
	MaxLabels    = 16
)

// ParseLabel reads "name=value" (a --remote-write-label flag): a Prometheus label name
// ([a-zA-Z_][a-zA-Z0-9_]*, not starting with __, not one loadproof sets; phase is allowed and names
// the whole run's phase) and a non-empty UTF-8 value.
func ParseLabel(s string) (string, string, error) {
	if len(s) > maxLabelText {
		return "", "", fmt.Errorf("remote-write label of %d bytes: at most %d", len(s), maxLabelText)
	}
	name, value, ok := strings.Cut(s, "=")
	if !ok || name == "" || value == "" {
		return "", "", fmt.Errorf("remote-write label %q: want name=value, both non-empty", clip(s))
	}
	for i, r := range name {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return "", "", fmt.Errorf("remote-write label name %q: a Prometheus label name is letters, digits and _, not starting with a digit", clip(name))
		}
	}
	if strings.HasPrefix(name, "__") {
		return "", "", fmt.Errorf("remote-write label name %q: names starting with __ are Prometheus's own", clip(name))
	}
	if reservedLabels[name] {
		return "", "", fmt.Errorf("remote-write label name %q: loadproof sets it on every series; pick another name", name)
	}
	if !utf8.ValidString(value) {
		return "", "", fmt.Errorf("remote-write label %q: its value is not valid UTF-8", name)
	}
	return name, value, nil
}
