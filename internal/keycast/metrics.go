package keycast

import (
	"bufio"
	"bytes"
	"strconv"
	"strings"
)

// MetricSeriesInfo describes one series of GET /api/metrics.
type MetricSeriesInfo struct {
	Name string
	Type string // "counter" or "gauge"
	Help string
}

// Names of the six series the load tool reads (docs/protocol-keycast.md,
// Server metrics snapshots).
const (
	MetricHTTPRPCRequests    = "keycast_http_rpc_requests_total"
	MetricHTTPRPCCacheHits   = "keycast_http_rpc_cache_hits_total"
	MetricHTTPRPCCacheMisses = "keycast_http_rpc_cache_misses_total"
	MetricHTTPRPCCacheSize   = "keycast_http_rpc_cache_size"
	MetricHTTPRPCSuccess     = "keycast_http_rpc_success_total"
	MetricHTTPRPCAuthErrors  = "keycast_http_rpc_auth_errors_total"
)

// MetricsContentType is the Content-Type of /api/metrics.
const MetricsContentType = "text/plain; version=0.0.4; charset=utf-8"

// MetricSeries lists the 19 series of the Dec-2025 server in output order
// (docs/protocol-keycast.md, /api/metrics), with Keycast's help texts.
var MetricSeries = []MetricSeriesInfo{
	{"keycast_cache_hits_total", "counter", "Authorization handler cache hits (handler found in memory)"},
	{"keycast_cache_misses_total", "counter", "Authorization handler cache misses (loaded from DB)"},
	{"keycast_cache_size", "gauge", "Current number of handlers in LRU cache"},
	{"keycast_nip46_requests_total", "counter", "Total NIP-46 signing requests received via relay"},
	{"keycast_nip46_rejected_hashring_total", "counter", "NIP-46 requests rejected (assigned to different instance)"},
	{"keycast_nip46_handler_not_found_total", "counter", "NIP-46 requests where authorization was not found"},
	{"keycast_nip46_processed_total", "counter", "NIP-46 requests successfully processed"},
	{"keycast_nip46_queue_dropped_total", "counter", "NIP-46 requests dropped due to queue full (backpressure)"},
	{MetricHTTPRPCRequests, "counter", "Total HTTP RPC requests to /api/nostr"},
	{MetricHTTPRPCCacheHits, "counter", "HTTP RPC handler cache hits"},
	{MetricHTTPRPCCacheMisses, "counter", "HTTP RPC handler cache misses"},
	{MetricHTTPRPCCacheSize, "gauge", "Current HTTP RPC handler cache size"},
	{MetricHTTPRPCSuccess, "counter", "HTTP RPC requests successfully processed"},
	{MetricHTTPRPCAuthErrors, "counter", "HTTP RPC authorization errors"},
	{"keycast_registrations_total", "counter", "Total successful user registrations"},
	{"keycast_logins_total", "counter", "Total successful logins"},
	{"keycast_login_failures_total", "counter", "Total failed login attempts"},
	{"keycast_oauth_authorizations_created_total", "counter", "Total OAuth authorizations created"},
	{"keycast_oauth_authorizations_revoked_total", "counter", "Total OAuth authorizations revoked"},
}

// AppendMetricsText appends the /api/metrics body in Keycast's layout: for
// each series of MetricSeries, "# HELP", "# TYPE" and the value line, series
// separated by one blank line. value returns the current value of a name.
func AppendMetricsText(dst []byte, value func(name string) uint64) []byte {
	for i, s := range MetricSeries {
		if i > 0 {
			dst = append(dst, '\n')
		}
		dst = append(dst, "# HELP "...)
		dst = append(dst, s.Name...)
		dst = append(dst, ' ')
		dst = append(dst, s.Help...)
		dst = append(dst, "\n# TYPE "...)
		dst = append(dst, s.Name...)
		dst = append(dst, ' ')
		dst = append(dst, s.Type...)
		dst = append(dst, '\n')
		dst = append(dst, s.Name...)
		dst = append(dst, ' ')
		dst = strconv.AppendUint(dst, value(s.Name), 10)
		dst = append(dst, '\n')
	}
	return dst
}

// ServerMetrics is the load tool's view of /api/metrics; field order as in
// the results file.
type ServerMetrics struct {
	HTTPRPCRequestsTotal uint64 `json:"http_rpc_requests_total"`
	HTTPRPCCacheHits     uint64 `json:"http_rpc_cache_hits"`
	HTTPRPCCacheMisses   uint64 `json:"http_rpc_cache_misses"`
	HTTPRPCCacheSize     uint64 `json:"http_rpc_cache_size"`
	HTTPRPCSuccess       uint64 `json:"http_rpc_success"`
	HTTPRPCAuthErrors    uint64 `json:"http_rpc_auth_errors"`
}

// ParsePrometheusValues parses Prometheus text the way the load tool does:
// lines that are empty or start with '#' are skipped; the rest are split on
// white space, token 0 is the name (labels included) and token 1 the value,
// kept only when it parses as an unsigned integer. Later lines win.
func ParsePrometheusValues(text []byte) map[string]uint64 {
	out := make(map[string]uint64)
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		if v, err := strconv.ParseUint(f[1], 10, 64); err == nil {
			out[f[0]] = v
		}
	}
	return out
}

// ParseServerMetrics extracts the six series the load tool keeps; a missing
// or non-integer series gives 0, so any body (even an HTML error page)
// parses.
func ParseServerMetrics(text []byte) ServerMetrics {
	v := ParsePrometheusValues(text)
	return ServerMetrics{
		HTTPRPCRequestsTotal: v[MetricHTTPRPCRequests],
		HTTPRPCCacheHits:     v[MetricHTTPRPCCacheHits],
		HTTPRPCCacheMisses:   v[MetricHTTPRPCCacheMisses],
		HTTPRPCCacheSize:     v[MetricHTTPRPCCacheSize],
		HTTPRPCSuccess:       v[MetricHTTPRPCSuccess],
		HTTPRPCAuthErrors:    v[MetricHTTPRPCAuthErrors],
	}
}
