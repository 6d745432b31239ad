package keycastload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/keycastresult"
)

// maxMetricsPage bounds the metrics page read.
const maxMetricsPage = 8 << 20

// metricsTimeout bounds each /api/metrics fetch. The page is a few counters held in memory; five
// seconds is ample for a healthy server and bounds what a dead endpoint adds to a run.
var metricsTimeout = 5 * time.Second

// metricsClient fetches /api/metrics for FetchServerMetrics; a run uses one of its own with its TLS
// options. Both are separate from the load clients, as upstream's shared client is.
var metricsClient = &http.Client{}

// FetchServerMetrics GETs <url>/api/metrics and parses it with prometheus/common/expfmt. It returns
// the six counters the upstream tool reads (a missing series reads 0, as upstream) and every
// unlabelled series by name. A non-2xx status, a page that is not Prometheus text, or a page
// without any keycast_http_rpc_* series is an error: upstream parses any page and reports zeros
// (docs/protocol-keycast.md, Quirks); we report no snapshot instead.
func FetchServerMetrics(ctx context.Context, url string) (keycastresult.ServerMetrics, map[string]float64, error) {
	return fetchServerMetrics(ctx, metricsClient, url)
}

// FetchServerMetricsTLS is FetchServerMetrics for a target reached with TLS options (--ca-cert,
// --insecure-skip-verify): what a coordinator reads before and after a run it spread. It fails as
// TLSOptions.Check does.
func FetchServerMetricsTLS(ctx context.Context, url string, o TLSOptions) (keycastresult.ServerMetrics, map[string]float64, error) {
	tc, err := o.ClientConfig(url)
	if err != nil {
		return keycastresult.ServerMetrics{}, nil, err
	}
	if tc == nil {
		return fetchServerMetrics(ctx, metricsClient, url)
	}
	tr := httpTransport(tc, 1)
	tr.DisableKeepAlives = true
	return fetchServerMetrics(ctx, &http.Client{Transport: tr}, url)
}

func fetchServerMetrics(ctx context.Context, hc *http.Client, url string) (keycastresult.ServerMetrics, map[string]float64, error) {
	u := strings.TrimRight(url, "/") + keycast.PathMetrics
	ctx, cancel := context.WithTimeout(ctx, metricsTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return keycastresult.ServerMetrics{}, nil, fmt.Errorf("keycastload: metrics URL %s: %w", u, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return keycastresult.ServerMetrics{}, nil, fmt.Errorf("keycastload: fetching %s: %w", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMetricsPage+1))
	if err != nil {
		return keycastresult.ServerMetrics{}, nil, fmt.Errorf("keycastload: reading %s: %w", u, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return keycastresult.ServerMetrics{}, nil, fmt.Errorf("keycastload: %s answered HTTP %d, not a metrics page; check the URL and that the server exports /api/metrics", u, resp.StatusCode)
	}
	if len(body) > maxMetricsPage {
		return keycastresult.ServerMetrics{}, nil, fmt.Errorf("keycastload: %s is larger than %d bytes; not a Keycast metrics page", u, maxMetricsPage)
	}
	sm, series, err := ParseMetrics(body)
	if err != nil {
		return keycastresult.ServerMetrics{}, nil, fmt.Errorf("keycastload: %s: %w", u, err)
	}
	return sm, series, nil
}

// ParseMetrics parses a Prometheus text page. It returns the six counters the upstream tool reads
// and the value of every unlabelled counter, gauge or untyped series.
func ParseMetrics(page []byte) (keycastresult.ServerMetrics, map[string]float64, error) {
	var sm keycastresult.ServerMetrics
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(page))
	if err != nil {
		return sm, nil, fmt.Errorf("not Prometheus text: %v", err)
	}
	series := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) != 0 {
				continue
			}
			var v float64
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				v = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				v = m.GetGauge().GetValue()
			case dto.MetricType_UNTYPED:
				v = m.GetUntyped().GetValue()
			default:
				continue
			}
			series[name] = v
		}
	}
	found := false
	for _, f := range []struct {
		name string
		dst  *uint64
	}{
		{keycast.MetricHTTPRPCRequests, &sm.HTTPRPCRequestsTotal},
		{keycast.MetricHTTPRPCCacheHits, &sm.HTTPRPCCacheHits},
		{keycast.MetricHTTPRPCCacheMisses, &sm.HTTPRPCCacheMisses},
		{keycast.MetricHTTPRPCCacheSize, &sm.HTTPRPCCacheSize},
		{keycast.MetricHTTPRPCSuccess, &sm.HTTPRPCSuccess},
		{keycast.MetricHTTPRPCAuthErrors, &sm.HTTPRPCAuthErrors},
	} {
		v, ok := series[f.name]
		if !ok {
			continue
		}
		found = true
		// Upstream keeps only values that parse as unsigned integers; a float or negative value
		// reads as 0 there too.
		if v >= 0 && v <= math.MaxUint64/2 && v == math.Trunc(v) {
			*f.dst = uint64(v)
		}
	}
	if !found {
		return sm, series, errors.New("no keycast_http_rpc_* series on the page; is this a Keycast server's /api/metrics?")
	}
	return sm, series, nil
}

// Snapshots builds the results' server_metrics from a before and an after snapshot: the two
// snapshots, the deltas of the six (after − before, saturating at 0; the cache size gauge is the
// after value), and the delta of every unlabelled series present in both.
func Snapshots(before, after keycastresult.ServerMetrics, seriesBefore, seriesAfter map[string]float64) *keycastresult.ServerMetricsSnapshots {
	sub := func(a, b uint64) uint64 {
		if a > b {
			return a - b
		}
		return 0
	}
	d := keycastresult.ServerMetrics{
		HTTPRPCRequestsTotal: sub(after.HTTPRPCRequestsTotal, before.HTTPRPCRequestsTotal),
		HTTPRPCCacheHits:     sub(after.HTTPRPCCacheHits, before.HTTPRPCCacheHits),
		HTTPRPCCacheMisses:   sub(after.HTTPRPCCacheMisses, before.HTTPRPCCacheMisses),
		HTTPRPCCacheSize:     after.HTTPRPCCacheSize,
		HTTPRPCSuccess:       sub(after.HTTPRPCSuccess, before.HTTPRPCSuccess),
		HTTPRPCAuthErrors:    sub(after.HTTPRPCAuthErrors, before.HTTPRPCAuthErrors),
	}
	s := &keycastresult.ServerMetricsSnapshots{Scope: keycastresult.ServerMetricsScope, Before: before, After: after, Deltas: &d}
	if len(seriesBefore) > 0 && len(seriesAfter) > 0 {
		s.SeriesDeltas = map[string]float64{}
		for name, a := range seriesAfter {
			if b, ok := seriesBefore[name]; ok {
				s.SeriesDeltas[name] = a - b
			}
		}
	}
	return s
}

// CacheBlock formats upstream's "=== Server-Side Cache Metrics ===" block (docs/protocol-keycast.md,
// run, step 9), starting with a blank line and ending with a newline.
func CacheBlock(before, after keycastresult.ServerMetrics) string {
	hits := after.HTTPRPCCacheHits - min(before.HTTPRPCCacheHits, after.HTTPRPCCacheHits)
	misses := after.HTTPRPCCacheMisses - min(before.HTTPRPCCacheMisses, after.HTTPRPCCacheMisses)
	ratio := 0.0
	if hits+misses > 0 {
		ratio = float64(hits) / float64(hits+misses) * 100
	}
	return fmt.Sprintf("\n=== Server-Side Cache Metrics ===\nCache hits:   %d (%.1f%%)\nCache misses: %d (%.1f%%)\nCache size:   %d\n",
		hits, ratio, misses, 100-ratio, after.HTTPRPCCacheSize)
}

// metricsLine is upstream's log line for a snapshot.
func metricsLine(label string, m keycastresult.ServerMetrics) string {
	return fmt.Sprintf("Server metrics %s: requests=%d, cache_hits=%d, cache_misses=%d, cache_size=%d",
		label, m.HTTPRPCRequestsTotal, m.HTTPRPCCacheHits, m.HTTPRPCCacheMisses, m.HTTPRPCCacheSize)
}

// sortedKeys returns a map's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
