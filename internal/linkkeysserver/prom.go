package linkkeysserver

import (
	"bufio"
	"cmp"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/VictoriaMetrics/metrics"

	"github.com/loadproof/loadproof/internal/admit"
	"github.com/loadproof/loadproof/internal/linkkeys"
)

// PrometheusNamespace prefixes every metric the server exports.
const PrometheusNamespace = "linkkeys_server"

// SourcePrefixLabel is the label of the per-source-prefix series.
const SourcePrefixLabel = "prefix"

// The exposition is written here, in the Prometheus text format (version 0.0.4), rather than
// through client_golang: client_golang and the protobuf runtime it needs run about 77 ms of
// package initialisation and page in about 2 MiB of the lean server's binary before a single
// connection (docs/benchmarks.md, LinkKeys server memory), for some fifty series whose text is
// a few lines of code. The Go runtime and process series come from
// github.com/VictoriaMetrics/metrics, which reads them only when a scrape asks. client_golang
// remains the reference: TestPrometheusMatchesClientGolang and FuzzPrometheusExposition
// (prom_test.go) parse both expositions with prometheus/common/expfmt and require the same
// families, types, help, labels and values.

// promSeries is one series of a family: its rendered labels ("" or `{a="b",c="d"}`, names in
// order) and how to read its value from a snapshot.
type promSeries struct {
	labels string
	value  func(*Snapshot) uint64
}

// promFamily is one metric family. Source families have one series per source prefix the
// snapshot carries and per field (with the prefix label first).
type promFamily struct {
	name, help, kind string
	series           []promSeries
	source           []linkkeys.SourceField
}

// PrometheusExporter serves the server's metrics on /metrics: the counters and gauges of the
// METRICS line (named by linkkeys.MetricsFields), the per-source-prefix counters (named by
// linkkeys.SourceFields, label prefix="<name>", one series per prefix the snapshot carries),
// the two limiters' statistics (label limiter="handshake" or "public_read") and the snapshot
// cache's, plus the Go runtime and process series (go_*, process_*) when asked for. Every
// series of a scrape comes from one snapshot, so the accounting identity holds within a
// scrape; every scrape reads afresh.
type PrometheusExporter struct {
	src      func() Snapshot
	process  bool
	families []promFamily // sorted by name
}

// NewPrometheusExporter returns an exporter reading src once per scrape: pass Server.Metrics
// (with processMetrics), or for a multi-process parent a function returning the children's
// sum (without: the parent's own process is not the server, and
// linkkeys_server_process_rss_bytes carries the children's summed RSS).
func NewPrometheusExporter(src func() Snapshot, processMetrics bool) *PrometheusExporter {
	e := &PrometheusExporter{src: src, process: processMetrics}
	byName := map[string]int{}
	family := func(name, help, kind string) *promFamily {
		name = PrometheusNamespace + "_" + name
		i, ok := byName[name]
		if !ok {
			i = len(e.families)
			byName[name] = i
			e.families = append(e.families, promFamily{name: name, help: help, kind: kind})
		}
		return &e.families[i]
	}
	add := func(kind, name, help string, labels [][2]string, value func(*Snapshot) uint64) {
		f := family(name, help, kind)
		f.series = append(f.series, promSeries{labels: renderLabels(labels), value: value})
	}

	// The METRICS line's fields, from its one table (process_rss_bytes is 0 when unreadable).
	for _, f := range linkkeys.MetricsFields() {
		var labels [][2]string
		if f.PromLabel[0] != "" {
			labels = [][2]string{f.PromLabel}
		}
		kind := "counter"
		if f.Kind == linkkeys.MetricGauge {
			kind = "gauge"
		}
		add(kind, f.PromName, f.Help, labels, func(s *Snapshot) uint64 {
			v, _ := f.Value(&s.MetricsLine)
			return v
		})
	}

	// The per-prefix counters (TCP_SOURCE_PREFIXES): linkkeys_server_source_<…>{prefix="<name>"[,reason="…"]}.
	for _, f := range linkkeys.SourceFields() {
		fam := family(f.PromName, f.Help, "counter")
		fam.source = append(fam.source, f)
	}

	checksHelp := "Limiter checks, by limiter and result."
	for _, l := range []struct {
		name string
		get  func(*Snapshot) *admit.LimiterStats
	}{
		{"handshake", func(s *Snapshot) *admit.LimiterStats { return &s.HandshakeLimiter }},
		{"public_read", func(s *Snapshot) *admit.LimiterStats { return &s.PublicReadLimiter }},
	} {
		get := l.get
		for _, r := range []struct {
			result string
			f      func(*admit.LimiterStats) uint64
		}{
			{"allow", func(v *admit.LimiterStats) uint64 { return v.Accepted }},
			{"per_source", func(v *admit.LimiterStats) uint64 { return v.RejectedPerSource }},
			{"overflow", func(v *admit.LimiterStats) uint64 { return v.RejectedOverflow }},
			{"global", func(v *admit.LimiterStats) uint64 { return v.RejectedGlobal }},
		} {
			f := r.f
			add("counter", "limiter_checks_total", checksHelp, [][2]string{{"limiter", l.name}, {"result", r.result}},
				func(s *Snapshot) uint64 { return f(get(s)) })
		}
		labels := [][2]string{{"limiter", l.name}}
		add("counter", "limiter_protection_mode_entries_total", "Windows in which the distinct-source threshold was reached.", labels,
			func(s *Snapshot) uint64 { return get(s).ProtectionModeEntries })
		add("gauge", "limiter_tracked_sources", "Distinct sources in the current window.", labels,
			func(s *Snapshot) uint64 { return uint64(get(s).TrackedSources) })
		add("gauge", "limiter_bucket_entries", "Per-source buckets held.", labels,
			func(s *Snapshot) uint64 { return uint64(get(s).BucketEntries) })
		add("gauge", "limiter_max_bucket_entries", "Bound on per-source buckets.", labels,
			func(s *Snapshot) uint64 { return uint64(get(s).MaxBucketEntries) })
	}

	add("counter", "snapshot_cache_hits_total", "Snapshot cache lookups served from a found entry.", nil,
		func(s *Snapshot) uint64 { return s.SnapshotCache.Hits })
	add("counter", "snapshot_cache_misses_total", "Snapshot cache lookups that ran the loader.", nil,
		func(s *Snapshot) uint64 { return s.SnapshotCache.Misses })
	add("counter", "snapshot_cache_coalesced_loads_total", "Snapshot cache lookups that waited for another caller's load.", nil,
		func(s *Snapshot) uint64 { return s.SnapshotCache.CoalescedLoads })
	add("counter", "snapshot_cache_negative_hits_total", "Snapshot cache lookups served from a not-found entry.", nil,
		func(s *Snapshot) uint64 { return s.SnapshotCache.NegativeHits })
	add("counter", "snapshot_cache_evictions_total", "Snapshot cache entries evicted to stay within bounds.", nil,
		func(s *Snapshot) uint64 { return s.SnapshotCache.Evictions })
	add("gauge", "snapshot_cache_entries", "Snapshot cache entries held.", nil,
		func(s *Snapshot) uint64 { return uint64(s.SnapshotCache.Entries) })
	add("gauge", "snapshot_cache_bytes", "Snapshot cache bytes held.", nil,
		func(s *Snapshot) uint64 { return uint64(s.SnapshotCache.Bytes) })

	// The order client_golang's registry gathers in: families by name, series by label values.
	slices.SortFunc(e.families, func(a, b promFamily) int { return cmp.Compare(a.name, b.name) })
	for i := range e.families {
		slices.SortStableFunc(e.families[i].series, func(a, b promSeries) int { return cmp.Compare(a.labels, b.labels) })
	}
	return e
}

// PrometheusContentType is the media type of the exposition.
const PrometheusContentType = "text/plain; version=0.0.4; charset=utf-8"

// ServeHTTP writes one scrape.
func (e *PrometheusExporter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", PrometheusContentType)
	_ = e.Write(w)
}

// Write writes one scrape (one snapshot, then the Go and process series if asked for) to w.
func (e *PrometheusExporter) Write(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 16<<10)
	snap := e.src()
	var b []byte
	for i := range e.families {
		f := &e.families[i]
		if len(f.series) == 0 && (len(f.source) == 0 || len(snap.Sources) == 0) {
			continue
		}
		b = appendFamily(b[:0], f, &snap)
		if len(b) == 0 {
			continue
		}
		bw.Write(b)
	}
	if e.process {
		metrics.ExposeMetadata(true)
		metrics.WriteProcessMetrics(bw)
		metrics.WriteFDMetrics(bw)
	}
	return bw.Flush()
}

// appendFamily renders one family (nothing for a source family without a valid prefix).
func appendFamily(b []byte, f *promFamily, s *Snapshot) []byte {
	start := len(b)
	b = append(b, "# HELP "...)
	b = append(b, f.name...)
	b = append(b, ' ')
	b = appendEscaped(b, f.help, false)
	b = append(b, "\n# TYPE "...)
	b = append(b, f.name...)
	b = append(b, ' ')
	b = append(b, f.kind...)
	b = append(b, '\n')
	n := 0
	for _, sr := range f.series {
		b = appendSample(b, f.name, sr.labels, sr.value(s))
		n++
	}
	if len(f.source) > 0 {
		type row struct {
			labels string
			v      uint64
		}
		var rows []row
		for i := range s.Sources {
			sc := &s.Sources[i]
			if !linkkeys.ValidSourcePrefixName(sc.Name) {
				continue
			}
			for _, fld := range f.source {
				labels := [][2]string{{SourcePrefixLabel, sc.Name}}
				if fld.PromLabel[0] != "" {
					labels = append(labels, fld.PromLabel)
				}
				rows = append(rows, row{renderLabels(labels), fld.Value(sc)})
			}
		}
		slices.SortStableFunc(rows, func(a, b row) int { return cmp.Compare(a.labels, b.labels) })
		for _, r := range rows {
			b = appendSample(b, f.name, r.labels, r.v)
			n++
		}
	}
	if n == 0 {
		return b[:start]
	}
	return b
}

func appendSample(b []byte, name, labels string, v uint64) []byte {
	b = append(b, name...)
	b = append(b, labels...)
	b = append(b, ' ')
	b = appendValue(b, float64(v))
	return append(b, '\n')
}

// appendValue writes v as client_golang's text encoder does (shortest 'g' form; 0 and 1 plain).
func appendValue(b []byte, v float64) []byte {
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

// renderLabels renders labels (name order as given; values escaped) as {a="b",c="d"}.
func renderLabels(labels [][2]string) string {
	if len(labels) == 0 {
		return ""
	}
	sorted := slices.Clone(labels)
	slices.SortStableFunc(sorted, func(a, b [2]string) int { return cmp.Compare(a[0], b[0]) })
	b := []byte{'{'}
	for i, l := range sorted {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, l[0]...)
		b = append(b, '=', '"')
		b = appendEscaped(b, l[1], true)
		b = append(b, '"')
	}
	return string(append(b, '}'))
}

// appendEscaped escapes per the text format: backslash and newline always, the double quote in
// label values.
func appendEscaped(b []byte, s string, quote bool) []byte {
	if !strings.ContainsAny(s, "\\\n\"") {
		return append(b, s...)
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, '\\', '\\')
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '"' && quote:
			b = append(b, '\\', '"')
		default:
			b = append(b, c)
		}
	}
	return b
}
