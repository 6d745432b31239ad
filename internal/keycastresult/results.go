// Package keycastresult owns the Keycast results file: the JSON that `keycast-loadtest run` writes, that
// capacity evidence embeds and that reports are drawn from. Its fields are upstream's newest form
// (docs/protocol-keycast.md, Results file) plus loadproof's additions (mergeable latency histograms,
// open-model figures, stop events, the machine record), so files in upstream's schema read here and
// ours keep every upstream field.
package keycastresult

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/loadproof/loadproof/internal/atomicfile"
	"github.com/loadproof/loadproof/internal/boundedfile"
	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/result"
)

// ServerMetricsScope is upstream's fixed caveat for endpoint snapshots.
const ServerMetricsScope = "Endpoint snapshots; calculate deltas only when the metrics endpoint aggregates every serving instance"

// Results is the whole results file.
type Results struct {
	Metadata      Metadata                `json:"metadata"`
	Summary       Summary                 `json:"summary"`
	Timeline      []TimelinePoint         `json:"timeline"`
	ServerMetrics *ServerMetricsSnapshots `json:"server_metrics"`

	// loadproof additions; absent in upstream files.

	// Envelope is loadproof's result model, shared with the LinkKeys harness: format, command and
	// flags, target, machine records, segments, totals by outcome class, whole-run histograms by
	// latency kind ("latency": from the intended send time in the open model; "uncorrected": from
	// the actual send), failure causes and the timeline of interval snapshots with server samples.
	// Nil in upstream files.
	*result.Envelope
	// OpenModel is set for --rate runs.
	OpenModel *OpenModel `json:"open_model,omitempty"`
	// ConnectFailureCauses counts the summary's connect_failures by cause ("network_econnrefused",
	// "network_tls", ...).
	ConnectFailureCauses map[string]int64 `json:"connect_failure_causes,omitempty"`
	// Stop is set when a live stop condition ended the run early, or a signal did.
	Stop *StopEvent `json:"stop,omitempty"`
}

// Latency returns every request's latency (from the intended send time in the open model), or nil
// for an upstream file, whose percentiles cannot be merged.
func (r *Results) Latency() *hist.Histogram { return r.hist("latency") }

// UncorrectedLatency returns the open model's latency from the actual send time, or nil.
func (r *Results) UncorrectedLatency() *hist.Histogram { return r.hist("uncorrected") }

func (r *Results) hist(kind string) *hist.Histogram {
	if r.Envelope == nil {
		return nil
	}
	return r.Histograms[kind]
}

// FailureCauses counts failures by cause ("http_503_admission_rejected", "network_econnrefused",
// …); nil for an upstream file.
func (r *Results) FailureCauses() map[string]int64 {
	if r.Envelope == nil {
		return nil
	}
	return r.Causes
}

// Metadata describes the run's configuration.
type Metadata struct {
	URL          string `json:"url"`
	Scenario     string `json:"scenario"`
	Method       string `json:"method"`
	Concurrency  int    `json:"concurrency"`
	DurationSecs uint64 `json:"duration_secs"`
	UserCount    int    `json:"user_count"`
	Timestamp    string `json:"timestamp"`
	Seed         uint64 `json:"seed"`
	// loadproof additions
	Requests   int64   `json:"requests,omitempty"`
	RampUpSecs uint64  `json:"ramp_up_secs,omitempty"`
	TargetRate float64 `json:"target_rate,omitempty"`
	// TLS records how an https target's certificate was verified; absent: against the system roots.
	TLS *TLS `json:"tls,omitempty"`
	// HTTPClient is the client that sent the requests: "fast" (the hand-written HTTP/1.1 client)
	// or "std" (net/http); absent in files written before the choice existed (fast).
	HTTPClient string `json:"http_client,omitempty"`
}

// TLS is the record of the certificate verification options (--ca-cert, --insecure-skip-verify).
type TLS struct {
	// CACert is the --ca-cert path and CACertSHA256 the SHA-256 of its bytes when the run read it.
	CACert       string `json:"ca_cert,omitempty"`
	CACertSHA256 string `json:"ca_cert_sha256,omitempty"`
	// InsecureSkipVerify: any certificate was accepted.
	InsecureSkipVerify bool `json:"insecure_skip_verify,omitempty"`
}

// Summary holds the aggregate figures.
type Summary struct {
	DurationSecs             float64 `json:"duration_secs"`
	RequestsPerSecond        float64 `json:"requests_per_second"`
	TotalRequests            uint64  `json:"total_requests"`
	SuccessfulRequests       uint64  `json:"successful_requests"`
	FailedRequests           uint64  `json:"failed_requests"`
	LatencyMinMs             float64 `json:"latency_min_ms"`
	LatencyP50Ms             float64 `json:"latency_p50_ms"`
	LatencyP95Ms             float64 `json:"latency_p95_ms"`
	LatencyP99Ms             float64 `json:"latency_p99_ms"`
	LatencyMaxMs             float64 `json:"latency_max_ms"`
	CacheHitRatio            float64 `json:"cache_hit_ratio"`
	ErrorRate                float64 `json:"error_rate"`
	UnintentionalErrorRate   float64 `json:"unintentional_error_rate"`
	ErrorsAuth               uint64  `json:"errors_auth"`
	ErrorsServer             uint64  `json:"errors_server"`
	ErrorsClient             uint64  `json:"errors_client"`
	ErrorsNetwork            uint64  `json:"errors_network"`
	RateLimitedRequests      uint64  `json:"rate_limited_requests"`
	IntentionalRejections    uint64  `json:"intentional_rejections"`
	IntentionalRejectionRate float64 `json:"intentional_rejection_rate"`
	// loadproof additions
	LatencyP90Ms   float64 `json:"latency_p90_ms,omitempty"`
	LatencyP999Ms  float64 `json:"latency_p99_9_ms,omitempty"`
	LatencyP9999Ms float64 `json:"latency_p99_99_ms,omitempty"`
	LatencyMeanMs  float64 `json:"latency_mean_ms,omitempty"`
	// CacheHitEstimateCount is the number of successful requests under 15 ms (the numerator of
	// CacheHitRatio), kept so merged results recompute the ratio exactly.
	CacheHitEstimateCount uint64 `json:"cache_hit_estimate_count,omitempty"`
	// ErrorsOther counts failures in no upstream bucket (for example 2xx with an error body).
	ErrorsOther uint64 `json:"errors_other,omitempty"`
	// ConnectFailures counts attempts that never became a request because no connection could be
	// opened (TCP connect or TLS handshake failed; a refused connect against a dead target). They are
	// not requests: not in total_requests, requests_per_second or the latency figures, so a dead
	// target cannot make throughput or p50 look better. They are failed attempts: error_rate and
	// unintentional_error_rate are taken over requests plus connect failures.
	ConnectFailures uint64 `json:"connect_failures,omitempty"`
	// CutOffRequests counts requests in flight when the run cut them off: at the end of the drain
	// after the duration, at a live stop condition or at a signal. Their outcome is unknown, so they
	// are in no other figure.
	CutOffRequests uint64 `json:"cut_off_requests,omitempty"`
}

// TimelinePoint is one progress sample; percentiles are cumulative over the run so far.
type TimelinePoint struct {
	ElapsedSecs     float64 `json:"elapsed_secs"`
	RequestsTotal   uint64  `json:"requests_total"`
	RequestsSuccess uint64  `json:"requests_success"`
	RequestsError   uint64  `json:"requests_error"`
	LatencyP50Ms    float64 `json:"latency_p50_ms"`
	LatencyP99Ms    float64 `json:"latency_p99_ms"`
}

// ServerMetrics are the six server counters upstream reads from /api/metrics.
type ServerMetrics struct {
	HTTPRPCRequestsTotal uint64 `json:"http_rpc_requests_total"`
	HTTPRPCCacheHits     uint64 `json:"http_rpc_cache_hits"`
	HTTPRPCCacheMisses   uint64 `json:"http_rpc_cache_misses"`
	HTTPRPCCacheSize     uint64 `json:"http_rpc_cache_size"`
	HTTPRPCSuccess       uint64 `json:"http_rpc_success"`
	HTTPRPCAuthErrors    uint64 `json:"http_rpc_auth_errors"`
}

// ServerMetricsSnapshots holds the before and after snapshots of one run.
type ServerMetricsSnapshots struct {
	Scope  string        `json:"scope"`
	Before ServerMetrics `json:"before"`
	After  ServerMetrics `json:"after"`
	// Deltas (loadproof addition): after minus before, saturating at 0; gauges (cache size) are
	// reported as the after value.
	Deltas *ServerMetrics `json:"deltas,omitempty"`
	// Series (loadproof addition): every unlabelled integer series of both snapshots' deltas, by name.
	SeriesDeltas map[string]float64 `json:"series_deltas,omitempty"`
}

// OpenModel holds the figures of a constant-arrival-rate run.
type OpenModel struct {
	TargetRate float64 `json:"target_rate"`
	RampFrom   float64 `json:"ramp_from,omitempty"`
	RampSecs   float64 `json:"ramp_secs,omitempty"`
	Scheduled  uint64  `json:"scheduled"`
	// LateSends counts requests sent more than LateThresholdMs after their intended time.
	LateSends       uint64  `json:"late_sends"`
	LateThresholdMs float64 `json:"late_threshold_ms"`
	// Dropped counts scheduled requests never sent because the run ended first.
	Dropped uint64 `json:"dropped"`
	// Uncorrected percentiles (from the actual send); the summary's are corrected.
	UncorrectedP50Ms  float64 `json:"uncorrected_p50_ms"`
	UncorrectedP95Ms  float64 `json:"uncorrected_p95_ms"`
	UncorrectedP99Ms  float64 `json:"uncorrected_p99_ms"`
	UncorrectedP999Ms float64 `json:"uncorrected_p99_9_ms"`
	UncorrectedMaxMs  float64 `json:"uncorrected_max_ms"`
}

// StopEvent records why a run ended before its planned end.
type StopEvent = result.StopEvent

// ErrNoHistogram is returned by Merge for results without a latency histogram (upstream files):
// their percentiles cannot be combined exactly.
var ErrNoHistogram = errors.New("keycastresult: result has no latency histogram; percentiles cannot be merged exactly")

// Read reads and checks a results file, ours or upstream's.
func Read(path string) (*Results, error) {
	b, err := boundedfile.Read(path, boundedfile.Result)
	if err != nil {
		return nil, fmt.Errorf("keycastresult: reading results %s: %w", path, err)
	}
	r, err := Parse(b)
	if err != nil {
		var ne *NotResultsError
		if errors.As(err, &ne) {
			ne.Path = path
			return nil, fmt.Errorf("keycastresult: %w", ne)
		}
		return nil, fmt.Errorf("keycastresult: %s: %w", path, err)
	}
	return r, nil
}

// Parse decodes a results file and checks that it is one (CheckShape: a *NotResultsError says what
// it is instead) and that its counts are consistent.
func Parse(b []byte) (*Results, error) {
	if err := CheckShape(b); err != nil {
		return nil, err
	}
	var r Results
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("not a results file: %w", err)
	}
	s := r.Summary
	for _, f := range []struct {
		name string
		v    uint64
	}{{"summary.total_requests", s.TotalRequests}, {"summary.successful_requests", s.SuccessfulRequests}, {"summary.failed_requests", s.FailedRequests}} {
		if f.v > result.MaxCount {
			return nil, fmt.Errorf("inconsistent results: %s is %d, above the %d any run can count", f.name, f.v, uint64(result.MaxCount))
		}
	}
	if s.SuccessfulRequests+s.FailedRequests != s.TotalRequests {
		return nil, fmt.Errorf("inconsistent results: successful %d + failed %d != total %d",
			s.SuccessfulRequests, s.FailedRequests, s.TotalRequests)
	}
	if h := r.Latency(); h != nil && uint64(h.Count()) != s.TotalRequests {
		return nil, fmt.Errorf("inconsistent results: histogram holds %d samples for %d requests",
			h.Count(), s.TotalRequests)
	}
	if r.Envelope != nil {
		if err := r.Envelope.Validate(); err != nil {
			return nil, err
		}
		if err := r.CheckCost(r.CostCapacity()); err != nil {
			return nil, err
		}
	}
	return &r, nil
}

// Write writes results as pretty JSON, atomically.
func Write(path string, r *Results) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("keycastresult: encoding results: %w", err)
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("keycastresult: %w", err)
		}
	}
	if err := atomicfile.Write(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("keycastresult: %w", err)
	}
	return nil
}

// Counts is what a run accumulates; Summarize turns it into a Summary.
type Counts struct {
	Total, Success, Failed                     uint64
	Auth, Server, Client, Network, Other       uint64
	RateLimited, Intentional, CacheHitEstimate uint64
	// ConnectFailures are attempts that never became requests (see Summary.ConnectFailures).
	ConnectFailures uint64
	// CutOff are requests abandoned in flight (see Summary.CutOffRequests).
	CutOff uint64
}

// Attempts is requests plus connect failures: the denominator of the error rates.
func (c Counts) Attempts() uint64 { return c.Total + c.ConnectFailures }

// UnintentionalErrorRate is (failed − intentional shedding + connect failures) / attempts, or 0 when
// nothing was attempted.
func (c Counts) UnintentionalErrorRate() float64 {
	if c.Attempts() == 0 {
		return 0
	}
	return float64(c.Failed-min(c.Intentional, c.Failed)+c.ConnectFailures) / float64(c.Attempts())
}

// Add adds o into c.
func (c *Counts) Add(o Counts) {
	c.Total += o.Total
	c.Success += o.Success
	c.Failed += o.Failed
	c.Auth += o.Auth
	c.Server += o.Server
	c.Client += o.Client
	c.Network += o.Network
	c.Other += o.Other
	c.RateLimited += o.RateLimited
	c.Intentional += o.Intentional
	c.CacheHitEstimate += o.CacheHitEstimate
	c.ConnectFailures += o.ConnectFailures
	c.CutOff += o.CutOff
}

// CountsOf recovers the counts from a summary.
func CountsOf(s Summary) Counts {
	return Counts{
		Total: s.TotalRequests, Success: s.SuccessfulRequests, Failed: s.FailedRequests,
		Auth: s.ErrorsAuth, Server: s.ErrorsServer, Client: s.ErrorsClient, Network: s.ErrorsNetwork,
		Other: s.ErrorsOther, RateLimited: s.RateLimitedRequests, Intentional: s.IntentionalRejections,
		CacheHitEstimate: s.CacheHitEstimateCount, ConnectFailures: s.ConnectFailures, CutOff: s.CutOffRequests,
	}
}

// Summarize computes the summary from counts, a histogram and the measured duration. Rates are
// defined as upstream defines them: error_rate = failed/total; unintentional_error_rate = (failed −
// intentional shedding)/total (a 429 is unintentional: a healthy phase should not see it);
// intentional_rejection_rate = intentional shedding/total; cache_hit_ratio = successful requests under
// 15 ms / successful requests. Connect failures (a loadproof addition) are failed attempts but not
// requests: the three rates are taken over requests plus connect failures, throughput and latency
// over requests alone; with no connect failure every figure is upstream's.
func Summarize(c Counts, h *hist.Histogram, duration time.Duration) Summary {
	s := Summary{
		DurationSecs:          duration.Seconds(),
		TotalRequests:         c.Total,
		SuccessfulRequests:    c.Success,
		FailedRequests:        c.Failed,
		ErrorsAuth:            c.Auth,
		ErrorsServer:          c.Server,
		ErrorsClient:          c.Client,
		ErrorsNetwork:         c.Network,
		ErrorsOther:           c.Other,
		RateLimitedRequests:   c.RateLimited,
		IntentionalRejections: c.Intentional,
		CacheHitEstimateCount: c.CacheHitEstimate,
		ConnectFailures:       c.ConnectFailures,
		CutOffRequests:        c.CutOff,
	}
	if duration > 0 {
		s.RequestsPerSecond = float64(c.Total) / duration.Seconds()
	}
	if a := c.Attempts(); a > 0 {
		s.ErrorRate = float64(c.Failed+c.ConnectFailures) / float64(a)
		s.UnintentionalErrorRate = c.UnintentionalErrorRate()
		s.IntentionalRejectionRate = float64(c.Intentional) / float64(a)
	}
	if c.Success > 0 {
		s.CacheHitRatio = float64(c.CacheHitEstimate) / float64(c.Success)
	}
	if h != nil && h.Count() > 0 {
		hs := h.Summary()
		s.LatencyMinMs, s.LatencyP50Ms, s.LatencyP95Ms, s.LatencyP99Ms, s.LatencyMaxMs = hs.MinMs, hs.P50Ms, hs.P95Ms, hs.P99Ms, hs.MaxMs
		s.LatencyP90Ms, s.LatencyP999Ms, s.LatencyP9999Ms, s.LatencyMeanMs = hs.P90Ms, hs.P999Ms, hs.P9999Ms, hs.MeanMs
	}
	return s
}

// Merge combines the results of segments of one run (processes or machines) exactly: counts add,
// histograms and interval snapshots merge, the duration is the longest segment's, and rates,
// percentiles and upstream's timeline are recomputed from the merged data. Metadata comes from the
// first part, with concurrency summed.
func Merge(parts []*Results) (*Results, error) {
	if len(parts) == 0 {
		return nil, errors.New("keycastresult: nothing to merge")
	}
	out := &Results{Metadata: parts[0].Metadata, Envelope: &result.Envelope{}}
	out.Metadata.Concurrency = 0
	var c Counts
	var dur float64
	connect := map[string]int64{}
	for _, p := range parts {
		if p.Latency() == nil {
			return nil, ErrNoHistogram
		}
		out.Metadata.Concurrency += p.Metadata.Concurrency
		c.Add(CountsOf(p.Summary))
		if err := out.Envelope.Merge(p.Envelope); err != nil {
			return nil, fmt.Errorf("keycastresult: %w", err)
		}
		dur = max(dur, p.Summary.DurationSecs)
		for k, v := range p.ConnectFailureCauses {
			connect[k] += v
		}
		if p.Stop != nil && out.Stop == nil {
			out.Stop = p.Stop
		}
		if p.OpenModel != nil {
			if out.OpenModel == nil {
				om := *p.OpenModel
				om.TargetRate, om.Scheduled, om.LateSends, om.Dropped = 0, 0, 0, 0
				out.OpenModel = &om
			}
			out.OpenModel.TargetRate += p.OpenModel.TargetRate
			out.OpenModel.Scheduled += p.OpenModel.Scheduled
			out.OpenModel.LateSends += p.OpenModel.LateSends
			out.OpenModel.Dropped += p.OpenModel.Dropped
		}
	}
	out.Summary = Summarize(c, out.Latency(), time.Duration(dur*float64(time.Second)))
	if unc := out.UncorrectedLatency(); unc != nil && out.OpenModel != nil {
		us := unc.Summary()
		out.OpenModel.UncorrectedP50Ms, out.OpenModel.UncorrectedP95Ms = us.P50Ms, us.P95Ms
		out.OpenModel.UncorrectedP99Ms, out.OpenModel.UncorrectedP999Ms, out.OpenModel.UncorrectedMaxMs = us.P99Ms, us.P999Ms, us.MaxMs
	}
	out.Timeline = TimelineOf(out.Envelope, timelineStep(parts[0].Timeline))
	if len(connect) > 0 {
		out.ConnectFailureCauses = connect
	}
	return out, nil
}

// timelineStep is the spacing of a part's timeline points (its --report-interval), 10 s when it
// cannot be told.
func timelineStep(tl []TimelinePoint) time.Duration {
	if len(tl) >= 2 && tl[1].ElapsedSecs > tl[0].ElapsedSecs {
		return time.Duration((tl[1].ElapsedSecs - tl[0].ElapsedSecs) * float64(time.Second)).Round(time.Millisecond)
	}
	return 10 * time.Second
}

// TimelineOf redraws upstream's timeline (cumulative counts and percentiles every step) from the
// interval snapshots of an envelope: a point at the start, one each time the elapsed time passes a
// multiple of step, and one at the end.
func TimelineOf(env *result.Envelope, step time.Duration) []TimelinePoint {
	points := []TimelinePoint{{}}
	if env == nil {
		return points
	}
	lat := hist.New()
	var total, success uint64
	next := step.Seconds()
	for i, iv := range env.Intervals {
		for cl, n := range iv.Counts {
			if cl == "connect_failure" || cl == "cut_off" {
				continue // attempts that were not requests (connect failures) or whose outcome is unknown
			}
			total += uint64(n)
			if cl == result.ClassSuccess {
				success += uint64(n)
			}
		}
		lat.Merge(iv.Latency["latency"])
		el := iv.T + iv.Secs
		last := i == len(env.Intervals)-1
		if el+1e-9 < next && !last {
			continue
		}
		for next <= el+1e-9 && step > 0 {
			next += step.Seconds()
		}
		points = append(points, TimelinePoint{ElapsedSecs: el, RequestsTotal: total, RequestsSuccess: success,
			RequestsError: total - success, LatencyP50Ms: ms(lat.Quantile(0.5)), LatencyP99Ms: ms(lat.Quantile(0.99))})
	}
	return points
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// NewEnvelope returns the envelope of a `run` result holding the given histograms (unc may be nil)
// and failure causes; the engine fills the rest in a real run.
func NewEnvelope(target string, lat, unc *hist.Histogram, causes map[string]int64) *result.Envelope {
	env := &result.Envelope{Format: result.Format, Harness: "keycast", Command: "run", Target: target,
		Histograms: map[string]*hist.Histogram{"latency": lat}, Causes: causes}
	if unc != nil {
		env.Histograms["uncorrected"] = unc
	}
	return env
}

// MergeRun merges result files that must be the segments of one run, as `loadproof report` is
// given them: result.CheckRun refuses files of different runs, a segment twice and mixed segment
// counts; a run whose files carry a run ID may lack segments, and the merge then says so
// (Partial, MissingSegments). names name the parts in messages.
func MergeRun(names []string, parts []*Results) (*Results, error) {
	ps := make([]result.Part, len(parts))
	for i, p := range parts {
		if p.Envelope == nil {
			return nil, fmt.Errorf("keycastresult: %s has no loadproof envelope (a results file of the seed's schema alone): it cannot be told to be a segment of this run", names[i])
		}
		ps[i] = result.Part{Name: names[i], Envelope: p.Envelope}
	}
	cov, err := result.CheckRun(ps)
	if err != nil {
		return nil, fmt.Errorf("keycastresult: %w", err)
	}
	out, err := Merge(parts)
	if err != nil {
		return nil, err
	}
	out.Envelope.MarkPartial(cov.Missing)
	return out, nil
}

// FailureBreakdown says how many requests there were and how they failed, and how many connects
// failed: "20 requests, 20 failed: 20 auth; 0 connect failures". A run's verdict quotes it.
func (s Summary) FailureBreakdown() string {
	var parts []string
	for _, b := range []struct {
		n    uint64
		name string
	}{
		{s.ErrorsAuth, "auth"}, {s.ErrorsServer, "server"}, {s.ErrorsClient, "client"}, {s.ErrorsNetwork, "network"},
		{s.RateLimitedRequests, "rate-limited"}, {s.IntentionalRejections, "shed"}, {s.ErrorsOther, "other"},
	} {
		if b.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", b.n, b.name))
		}
	}
	out := fmt.Sprintf("%d requests, %d failed", s.TotalRequests, s.FailedRequests)
	if len(parts) > 0 {
		out += ": " + strings.Join(parts, ", ")
	}
	return out + fmt.Sprintf("; %d connect failures", s.ConnectFailures)
}
