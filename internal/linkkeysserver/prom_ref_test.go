package linkkeysserver

// The reference for the hand-rolled exposition in prom.go: the same families built on
// client_golang, as the server exported them before prom.go (docs/benchmarks.md, LinkKeys server
// memory). The differential test and fuzz target in prom_test.go hold prom.go to it.

import (
	"net/http"

	"github.com/loadproof/loadproof/internal/admit"
	"github.com/loadproof/loadproof/internal/linkkeys"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// snapshotCollector exposes one Snapshot per scrape: every series of a scrape comes from the same
// reading (so the accounting identity holds within a scrape), and every scrape reads afresh (so a
// client comparing scrapes before and after a short run sees the run).
type snapshotCollector struct {
	src    func() Snapshot
	series []series
	// sources are the per-prefix series: one family per linkkeys.SourceFields Prometheus name,
	// with a prefix label (and the field's own label), one series per configured prefix.
	sources []sourceSeries
}

type sourceSeries struct {
	desc  *prometheus.Desc
	field linkkeys.SourceField
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
	seen := map[*prometheus.Desc]bool{}
	for _, s := range c.sources {
		if !seen[s.desc] {
			seen[s.desc] = true
			ch <- s.desc
		}
	}
}

func (c *snapshotCollector) Collect(ch chan<- prometheus.Metric) {
	snap := c.src()
	for _, s := range c.series {
		ch <- prometheus.MustNewConstMetric(s.desc, s.kind, s.f(snap))
	}
	for i := range snap.Sources {
		sc := &snap.Sources[i]
		if !linkkeys.ValidSourcePrefixName(sc.Name) {
			continue
		}
		for _, s := range c.sources {
			labels := []string{sc.Name}
			if s.field.PromLabel[0] != "" {
				labels = append(labels, s.field.PromLabel[1])
			}
			ch <- prometheus.MustNewConstMetric(s.desc, prometheus.CounterValue, float64(s.field.Value(sc)), labels...)
		}
	}
}

// referenceRegistry returns a registry exposing src's metrics: the
// counters and gauges of the METRICS line (named by linkkeys.MetricsFields),
// the per-source-prefix counters (named by linkkeys.SourceFields, with a
// prefix="<name>" label, one series per prefix the snapshot carries),
// the two limiters' statistics
// (label limiter="handshake" or "public_read") and the snapshot cache's, as
// counters and gauges of one collector, plus the standard Go runtime and process
// collectors when processCollectors is set. src is read once per scrape;
// pass Server.Metrics, or for a multi-process parent a function
// returning the children's sum (and processCollectors false: the parent's
// own process is not the server; linkkeys_server_process_rss_bytes carries
// the children's summed RSS).
func referenceRegistry(src func() Snapshot, processCollectors bool) *prometheus.Registry {
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

	// The METRICS line's fields, from its one table. process_rss_bytes is
	// 0 when unreadable.
	for _, f := range linkkeys.MetricsFields() {
		var labels prometheus.Labels
		if f.PromLabel[0] != "" {
			labels = prometheus.Labels{f.PromLabel[0]: f.PromLabel[1]}
		}
		kind := prometheus.CounterValue
		if f.Kind == linkkeys.MetricGauge {
			kind = prometheus.GaugeValue
		}
		add(kind, f.PromName, f.Help, labels, func(s Snapshot) float64 {
			v, _ := f.Value(&s.MetricsLine)
			return u(v)
		})
	}

	// The per-prefix counters (TCP_SOURCE_PREFIXES), one family per Prometheus name of the table:
	// linkkeys_server_source_<…>{prefix="<name>"[,reason="…"]}.
	descs := map[string]*prometheus.Desc{}
	for _, f := range linkkeys.SourceFields() {
		d, ok := descs[f.PromName]
		if !ok {
			labels := []string{SourcePrefixLabel}
			if f.PromLabel[0] != "" {
				labels = append(labels, f.PromLabel[0])
			}
			d = prometheus.NewDesc(prometheus.BuildFQName(PrometheusNamespace, "", f.PromName), f.Help, labels, nil)
			descs[f.PromName] = d
		}
		c.sources = append(c.sources, sourceSeries{desc: d, field: f})
	}

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

	reg.MustRegister(c)
	if processCollectors {
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	return reg
}

// referenceHandler serves reg in the Prometheus text format.
func referenceHandler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
}
