package keycast

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"
)

// ServerMetricsScope is the fixed "scope" text of ServerMetricsSnapshots.
const ServerMetricsScope = "Endpoint snapshots; calculate deltas only when the metrics endpoint aggregates every serving instance"

// TestResults is the results file of run and the "results" of each capacity
// phase (§1.6, newest a8d40c9 form). Machine and LatencyHistogram are
// loadproof additions, left out when empty, so files stay readable by the
// Keycast tool (serde ignores unknown fields).
type TestResults struct {
	Metadata      TestMetadata            `json:"metadata"`
	Summary       MetricsSummary          `json:"summary"`
	Timeline      []TimelinePoint         `json:"timeline"`
	ServerMetrics *ServerMetricsSnapshots `json:"server_metrics"`

	// Machine is the machine record (internal/machine) of the load host.
	Machine json.RawMessage `json:"machine,omitempty"`
	// LatencyHistogram is the stable JSON form of the latency histogram
	// (internal/hist), so reports can merge and recompute percentiles.
	LatencyHistogram json.RawMessage `json:"latency_histogram,omitempty"`
}

// TestMetadata describes a run. Scenario and Method use the Rust Debug
// spellings (Scenario.DebugName, Method.DebugName).
type TestMetadata struct {
	URL          string `json:"url"`
	Scenario     string `json:"scenario"`
	Method       string `json:"method"`
	Concurrency  int    `json:"concurrency"`
	DurationSecs uint64 `json:"duration_secs"`
	UserCount    int    `json:"user_count"`
	Timestamp    string `json:"timestamp"`
	Seed         uint64 `json:"seed"`

	// Model is "closed" (workers, the Keycast model) or "open" (arrival
	// rate); a loadproof addition, empty means closed.
	Model string `json:"model,omitempty"`
	// TargetRate is the open-model arrival rate in requests per second.
	TargetRate float64 `json:"target_rate,omitempty"`
}

// MetricsSummary aggregates a run; field order as in the a8d40c9 fixture.
type MetricsSummary struct {
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
}

// TimelinePoint is one progress sample; percentiles are cumulative.
type TimelinePoint struct {
	ElapsedSecs     float64 `json:"elapsed_secs"`
	RequestsTotal   uint64  `json:"requests_total"`
	RequestsSuccess uint64  `json:"requests_success"`
	RequestsError   uint64  `json:"requests_error"`
	LatencyP50Ms    float64 `json:"latency_p50_ms"`
	LatencyP99Ms    float64 `json:"latency_p99_ms"`
}

// ServerMetricsSnapshots holds /api/metrics before and after a run; present
// only when both fetches succeeded.
type ServerMetricsSnapshots struct {
	Scope  string        `json:"scope"`
	Before ServerMetrics `json:"before"`
	After  ServerMetrics `json:"after"`
}

// FormatTimestamp formats t as RFC 3339 UTC with nanoseconds, as chrono's
// to_rfc3339 of a Utc time does (e.g. 2025-12-10T12:34:56.123456789Z).
func FormatTimestamp(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000000000Z")
}

// ReadResultsFile reads a results file. Fields added in later versions
// default to zero/null, as serde defaults do; unknown fields are ignored.
func ReadResultsFile(path string) (*TestResults, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("keycast: reading results file: %w", err)
	}
	return ParseResults(path, data)
}

// ParseResults is ReadResultsFile on bytes; path is used in messages only.
func ParseResults(path string, data []byte) (*TestResults, error) {
	var r TestResults
	if err := json.Unmarshal(data, &r); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line, col := lineCol(data, se.Offset)
			return nil, fmt.Errorf("keycast: results file %s is not valid JSON at line %d column %d: %v", path, line, col, se)
		}
		return nil, fmt.Errorf("keycast: results file %s does not have the results format: %s", path, jsonErrText(err))
	}
	if r.Timeline == nil {
		r.Timeline = []TimelinePoint{}
	}
	return &r, nil
}

// MarshalResults returns r as 2-space indented JSON, as the tool writes it.
func MarshalResults(r *TestResults) ([]byte, error) {
	if r.Timeline == nil {
		cp := *r
		cp.Timeline = []TimelinePoint{}
		r = &cp
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("keycast: encoding results: %w", err)
	}
	return b, nil
}

// WriteResultsFile writes r with MarshalResults, atomically, mode 0644.
func WriteResultsFile(path string, r *TestResults) error {
	b, err := MarshalResults(r)
	if err != nil {
		return err
	}
	return writeFileAtomic(path, b, 0o644)
}
