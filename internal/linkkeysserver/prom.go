package linkkeysserver

import (
	"net/http"

	"github.com/loadproof/loadproof/internal/admit"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// PrometheusNamespace prefixes every metric the server exports.
const PrometheusNamespace = "linkkeys_server"

// memoSnapshot takes at most one snapshot per short window, so the ~40
// metric funcs of one scrape read one consistent snapshot (and the limiter
// shards are locked once per scrape, not once per metric).
// snapshotCollector exposes one Snapshot per scrape: every series of a scrape comes from the same
// reading (so the accounting identity holds within a scrape), and every scrape reads afresh (so a
// client comparing scrapes before and after a short run sees the run).
type snapshotCollector struct {
	src    func() Snapshot
	series []series
}

type series struct {
	desc *prometheus.Desc
	kind prometheus.ValueType
	f    func(Snapshot) float64
}

func (c *snapshotCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, s := range c.series {
		ch <- s.desc
	}
}

func (c *snapshotCollector) Collect(ch chan<- prometheus.Metric) {
	snap := c.src()
	for _, s := range c.series {
		ch <- prometheus.MustNewConstMetric(s.desc, s.kind, s.f(snap))
	}
}

// NewPrometheusRegistry returns a registry exposing src's metrics: the
// counters and gauges of the METRICS line, the two limiters' statistics
// (label limiter="handshake" or "public_read") and the snapshot cache's, as
// counters and gauges of one collector, plus the standard Go runtime and process
// collectors when processCollectors is set. src is read once per scrape;
// pass Server.Metrics, or for a multi-process parent a function
// returning the children's sum (and processCollectors false: the parent's
// own process is not the server; linkkeys_server_process_rss_bytes carries
// the children's summed RSS).
func NewPrometheusRegistry(src func() Snapshot, processCollectors bool) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	c := &snapshotCollector{src: src}
	add := func(kind prometheus.ValueType, name, help string, labels prometheus.Labels, f func(Snapshot) float64) {
		desc := prometheus.NewDesc(prometheus.BuildFQName(PrometheusNamespace, "", name), help, nil, labels)
		c.series = append(c.series, series{desc: desc, kind: kind, f: f})
	}
	counter := func(name, help string, labels prometheus.Labels, f func(Snapshot) float64) {
		add(prometheus.CounterValue, name, help, labels, f)
	}
	gauge := func(name, help string, labels prometheus.Labels, f func(Snapshot) float64) {
		add(prometheus.GaugeValue, name, help, labels, f)
	}
	u := func(v uint64) float64 { return float64(v) }

	counter("accepted_connections_total", "Connections accepted (every accept()).", nil,
		func(s Snapshot) float64 { return u(s.AcceptedConnections) })
	gauge("open_connections", "Sockets open from accept to close, handshaking or established.", nil,
		func(s Snapshot) float64 { return u(s.OpenConnections) })
	gauge("established_connections", "Connections past the TLS handshake.", nil,
		func(s Snapshot) float64 { return u(s.EstablishedConnections) })
	gauge("parked_connections", "Established connections parked without a goroutine or buffers.", nil,
		func(s Snapshot) float64 { return u(s.ParkedConnections) })
	gauge("handshakes_in_progress", "Connections waiting for a handshake slot or in the TLS handshake.", nil,
		func(s Snapshot) float64 { return u(s.HandshakesInProgress) })
	counter("established_total", "TLS handshakes completed.", nil,
		func(s Snapshot) float64 { return u(s.EstablishedTotal) })
	counter("handshake_timeouts_total", "Handshake slot waits plus handshakes past TCP_HANDSHAKE_TIMEOUT_SECONDS.", nil,
		func(s Snapshot) float64 { return u(s.HandshakeTimeouts) })
	counter("handshake_rejections_total", "Failed TLS handshakes.", nil,
		func(s Snapshot) float64 { return u(s.HandshakeRejections) })
	shedHelp := "Connections closed before the TLS handshake, by reason."
	counter("shed_connections_total", shedHelp, prometheus.Labels{"reason": "connection_limit"},
		func(s Snapshot) float64 { return u(s.ShedConnectionLimit) })
	counter("shed_connections_total", shedHelp, prometheus.Labels{"reason": "handshake_per_source"},
		func(s Snapshot) float64 { return u(s.ShedHandshakePerSource) })
	counter("shed_connections_total", shedHelp, prometheus.Labels{"reason": "handshake_overflow"},
		func(s Snapshot) float64 { return u(s.ShedHandshakeOverflow) })
	counter("shed_connections_total", shedHelp, prometheus.Labels{"reason": "handshake_global"},
		func(s Snapshot) float64 { return u(s.ShedHandshakeGlobal) })
	counter("frames_processed_total", "Frames dispatched, error responses included.", nil,
		func(s Snapshot) float64 { return u(s.FramesProcessed) })
	gauge("frame_buffer_bytes", "Bytes of frame bodies announced and not yet handed to dispatch.", nil,
		func(s Snapshot) float64 { return u(s.FrameBufferBytes) })
	counter("rate_limited_responses_total", "Public-read requests answered with status 7.", nil,
		func(s Snapshot) float64 { return u(s.RateLimitedResponses) })

	checksHelp := "Limiter checks, by limiter and result."
	for _, l := range []struct {
		name string
		get  func(Snapshot) admit.LimiterStats
	}{
		{"handshake", func(s Snapshot) admit.LimiterStats { return s.HandshakeLimiter }},
		{"public_read", func(s Snapshot) admit.LimiterStats { return s.PublicReadLimiter }},
	} {
		get := l.get
		for _, r := range []struct {
			result string
			f      func(admit.LimiterStats) uint64
		}{
			{"allow", func(v admit.LimiterStats) uint64 { return v.Accepted }},
			{"per_source", func(v admit.LimiterStats) uint64 { return v.RejectedPerSource }},
			{"overflow", func(v admit.LimiterStats) uint64 { return v.RejectedOverflow }},
			{"global", func(v admit.LimiterStats) uint64 { return v.RejectedGlobal }},
		} {
			f := r.f
			counter("limiter_checks_total", checksHelp, prometheus.Labels{"limiter": l.name, "result": r.result},
				func(s Snapshot) float64 { return u(f(get(s))) })
		}
		labels := prometheus.Labels{"limiter": l.name}
		counter("limiter_protection_mode_entries_total", "Windows in which the distinct-source threshold was reached.", labels,
			func(s Snapshot) float64 { return u(get(s).ProtectionModeEntries) })
		gauge("limiter_tracked_sources", "Distinct sources in the current window.", labels,
			func(s Snapshot) float64 { return float64(get(s).TrackedSources) })
		gauge("limiter_bucket_entries", "Per-source buckets held.", labels,
			func(s Snapshot) float64 { return float64(get(s).BucketEntries) })
		gauge("limiter_max_bucket_entries", "Bound on per-source buckets.", labels,
			func(s Snapshot) float64 { return float64(get(s).MaxBucketEntries) })
	}

	counter("snapshot_cache_hits_total", "Snapshot cache lookups served from a found entry.", nil,
		func(s Snapshot) float64 { return u(s.SnapshotCache.Hits) })
	counter("snapshot_cache_misses_total", "Snapshot cache lookups that ran the loader.", nil,
		func(s Snapshot) float64 { return u(s.SnapshotCache.Misses) })
	counter("snapshot_cache_coalesced_loads_total", "Snapshot cache lookups that waited for another caller's load.", nil,
		func(s Snapshot) float64 { return u(s.SnapshotCache.CoalescedLoads) })
	counter("snapshot_cache_negative_hits_total", "Snapshot cache lookups served from a not-found entry.", nil,
		func(s Snapshot) float64 { return u(s.SnapshotCache.NegativeHits) })
	counter("snapshot_cache_evictions_total", "Snapshot cache entries evicted to stay within bounds.", nil,
		func(s Snapshot) float64 { return u(s.SnapshotCache.Evictions) })
	gauge("snapshot_cache_entries", "Snapshot cache entries held.", nil,
		func(s Snapshot) float64 { return float64(s.SnapshotCache.Entries) })
	gauge("snapshot_cache_bytes", "Snapshot cache bytes held.", nil,
		func(s Snapshot) float64 { return float64(s.SnapshotCache.Bytes) })

	gauge("process_rss_bytes", "Resident set size of the server process(es) (VmRSS).", nil, func(s Snapshot) float64 {
		if s.ProcessRSSBytes == nil {
			return 0
		}
		return float64(*s.ProcessRSSBytes)
	})
	reg.MustRegister(c)
	if processCollectors {
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	return reg
}

// PrometheusHandler serves reg in the Prometheus text format.
func PrometheusHandler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
}
