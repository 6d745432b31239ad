package linkkeysload

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/loadproof/loadproof/internal/boundedfile"
	"github.com/loadproof/loadproof/internal/linkkeys"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// ReadMetricsLog returns every METRICS line in a server log, in order, skipping the log's other
// lines. A line that starts with the prefix but does not parse is an error.
func ReadMetricsLog(r io.Reader) ([]linkkeys.MetricsLine, error) {
	var out []linkkeys.MetricsLine
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), linkkeys.MaxMetricsLineBytes+1)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if !strings.HasPrefix(line, linkkeys.MetricsPrefix) {
			continue
		}
		s, err := linkkeys.ParseMetricsLine(line)
		if err != nil {
			return out, errorf("line %d: %w", n, err)
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

// promAliases maps Prometheus metric names of other exporters to METRICS fields.
var promAliases = map[string]string{
	"process_resident_memory_bytes": "process_rss_bytes",
}

// promSeries maps this server's Prometheus series (name without namespace, then the label as
// "name=value" or "") to METRICS fields, from the one field table.
var promSeries = func() map[[2]string]string {
	m := map[[2]string]string{}
	for _, f := range linkkeys.MetricsFields() {
		label := ""
		if f.PromLabel[0] != "" {
			label = f.PromLabel[0] + "=" + f.PromLabel[1]
		}
		m[[2]string{f.PromName, label}] = f.Name
	}
	return m
}()

// promField returns the METRICS field a sample stands for: this server's series by the field table
// (linkkeys_server_ namespace), else, for other exporters, the name after a "linkkeys_server_",
// "linkkeys_tcp_" or "linkkeys_" namespace and a "_total" suffix are removed (shed counters may come as
// one family with a reason label). ok is false for a labelled sample it does not know.
func promField(name string, labels []promLabel) (key string, ok bool) {
	label := ""
	if len(labels) == 1 {
		label = labels[0].name + "=" + labels[0].value
	}
	if len(labels) <= 1 {
		if rest, found := strings.CutPrefix(name, "linkkeys_server_"); found {
			if f, known := promSeries[[2]string{rest, label}]; known {
				return f, true
			}
		}
	}
	if alias, found := promAliases[name]; found && len(labels) == 0 {
		return alias, true
	}
	base := promKey(name)
	switch {
	case len(labels) == 0:
		return base, true
	case len(labels) == 1 && base == "shed_connections" && labels[0].name == "reason":
		return "shed_" + labels[0].value, true
	}
	return "", false
}

type promLabel struct{ name, value string }

// promSourceField returns the prefix and counter a per-source-prefix series of this server stands
// for (linkkeys_server_source_…{prefix="<name>"[,reason="…"]}, named by linkkeys.SourceFields), so
// a scrape reads back into MetricsLine.Sources what the METRICS line's source_<name>_<counter>
// fields give.
func promSourceField(name string, labels []promLabel) (prefix, counter string, ok bool) {
	rest, found := strings.CutPrefix(name, "linkkeys_server_")
	if !found || !strings.HasPrefix(rest, "source_") || len(labels) == 0 || len(labels) > 2 {
		return "", "", false
	}
	var other promLabel
	for _, l := range labels {
		switch {
		case l.name == "prefix" && prefix == "":
			prefix = l.value
		case other.name == "":
			other = l
		default:
			return "", "", false
		}
	}
	f, known := linkkeys.LookupSourceProm(rest, other.name, other.value)
	if !known || !linkkeys.ValidSourcePrefixName(prefix) {
		return "", "", false
	}
	return prefix, f.Name, true
}

// ParsePrometheus reads a Prometheus text exposition and returns the server counters it contains as
// a METRICS reading (label "scrape"). This server's series are matched through the METRICS field
// table (see promField for other exporters' names), its per-source-prefix series through
// linkkeys.SourceFields into Sources (in prefix name order); the standard
// process_resident_memory_bytes is process_rss_bytes. Appended fields not found are listed in
// Absent; other unlabelled samples land in Extra. At least accepted_connections must be present.
func ParsePrometheus(r io.Reader) (linkkeys.MetricsLine, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(io.LimitReader(r, 16<<20))
	if err != nil {
		return linkkeys.MetricsLine{}, errorf("reading Prometheus metrics: %v", err)
	}
	s := linkkeys.WithoutAppended(linkkeys.MetricsLine{Label: "scrape"})
	found := false
	names := make([]string, 0, len(fams))
	for n := range fams {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		// The client_model types are used through their getters only, so this package does not
		// import client_model directly.
		for _, m := range fams[name].GetMetric() {
			var labels []promLabel
			for _, l := range m.GetLabel() {
				labels = append(labels, promLabel{l.GetName(), l.GetValue()})
			}
			var v float64
			switch {
			case m.Counter != nil:
				v = m.Counter.GetValue()
			case m.Gauge != nil:
				v = m.Gauge.GetValue()
			case m.Untyped != nil:
				v = m.Untyped.GetValue()
			default:
				continue
			}
			if prefix, counter, ok := promSourceField(name, labels); ok {
				if v < 0 || math.IsNaN(v) || v >= math.MaxUint64 {
					return linkkeys.MetricsLine{}, errorf("reading Prometheus metrics: %s{prefix=%q} = %v is not a count", name, prefix, v)
				}
				s.SetSourceCounter(prefix, counter, uint64(v))
				continue
			}
			key, ok := promField(name, labels)
			if !ok {
				continue
			}
			if key == "process_rss_bytes" {
				if v >= 0 && v < math.MaxUint64 {
					s.SetCounter(key, uint64(v))
				}
				continue
			}
			if linkkeys.IsMetricsCounter(key) {
				if v < 0 || math.IsNaN(v) || v >= math.MaxUint64 {
					return linkkeys.MetricsLine{}, errorf("reading Prometheus metrics: %s = %v is not a count", name, v)
				}
				s.SetCounter(key, uint64(v))
				found = found || key == "accepted_connections"
				continue
			}
			if s.Extra == nil {
				s.Extra = map[string]float64{}
			}
			s.Extra[key] = v
		}
	}
	if !found {
		return linkkeys.MetricsLine{}, errorf("reading Prometheus metrics: no accepted_connections counter (looked for linkkeys_server_accepted_connections_total and similar); is this a LinkKeys server's /metrics?")
	}
	return s, nil
}

func promKey(name string) string {
	for _, ns := range []string{"linkkeys_server_", "linkkeys_tcp_", "linkkeys_"} {
		if rest, ok := strings.CutPrefix(name, ns); ok {
			name = rest
			break
		}
	}
	return strings.TrimSuffix(name, "_total")
}

// MetricsSource reads the server's counters: from a METRICS log file the server writes, or from its
// Prometheus endpoint (http://127.0.0.1:port/metrics).
type MetricsSource struct {
	// Location is a file path or an http(s) URL.
	Location string
	// Client is used for URLs; nil means a client with a 5 s timeout.
	Client *http.Client
}

// IsURL reports whether the source is a Prometheus endpoint.
func (m MetricsSource) IsURL() bool {
	return strings.HasPrefix(m.Location, "http://") || strings.HasPrefix(m.Location, "https://")
}

// Mark is a position in the source: for a log file, its size when marked.
type Mark struct {
	Offset int64
}

// Mark returns the current position: readings taken later come after it.
func (m MetricsSource) Mark() (Mark, error) {
	if m.IsURL() {
		return Mark{}, nil
	}
	fi, err := os.Stat(m.Location)
	if err != nil {
		return Mark{}, errorf("reading server METRICS log %s: %w", m.Location, err)
	}
	return Mark{Offset: fi.Size()}, nil
}

// Latest returns the newest reading: the last METRICS line of a log file, or a fresh scrape.
func (m MetricsSource) Latest(ctx context.Context) (linkkeys.MetricsLine, error) {
	if m.IsURL() {
		return m.scrape(ctx)
	}
	b, err := boundedfile.Read(m.Location, boundedfile.MetricsLog)
	if err != nil {
		return linkkeys.MetricsLine{}, errorf("reading server METRICS log %s: %w", m.Location, err)
	}
	snaps, err := ReadMetricsLog(bytes.NewReader(b))
	if err != nil {
		return linkkeys.MetricsLine{}, errorf("reading server METRICS log %s: %w", m.Location, err)
	}
	if len(snaps) == 0 {
		return linkkeys.MetricsLine{}, errorf("server METRICS log %s holds no METRICS line yet; is it the server's stdout?", m.Location)
	}
	return snaps[len(snaps)-1], nil
}

// Quiet marks the source now and waits for the first reading after the mark with no handshake in
// progress (see Settled). Taken before a run, it makes sure earlier traffic is fully counted before
// the run starts; taken after, that the run's own attempts are.
func (m MetricsSource) Quiet(ctx context.Context, wait time.Duration) (linkkeys.MetricsLine, error) {
	mark, err := m.Mark()
	if err != nil {
		return linkkeys.MetricsLine{}, err
	}
	return m.Settled(ctx, mark, wait)
}

// ErrNoReading is returned by Settled when no reading at all arrived after the mark before the wait
// ended (a server that stopped printing METRICS lines, or whose interval is longer than the wait).
var ErrNoReading = errors.New("linkkeysload: no server METRICS reading arrived in time")

// ErrNoQuietReading is returned by Settled when the server never reported a reading with no
// handshakes in progress before the wait ended.
var ErrNoQuietReading = errors.New("linkkeysload: no server METRICS reading without handshakes in progress arrived in time")

// Settled waits for a reading taken after mark in which no handshake is in progress (so every
// attempt so far has been counted) and returns it. A log file is polled for new lines (the server
// writes one every --metrics-interval-secs); an endpoint is scraped until quiet. It gives up after
// wait, returning the last reading seen with ErrNoQuietReading.
func (m MetricsSource) Settled(ctx context.Context, mark Mark, wait time.Duration) (linkkeys.MetricsLine, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last linkkeys.MetricsLine
	have := false
	for {
		var s []linkkeys.MetricsLine
		var err error
		if m.IsURL() {
			var one linkkeys.MetricsLine
			one, err = m.scrape(ctx)
			s = []linkkeys.MetricsLine{one}
		} else {
			s, err = m.after(mark.Offset)
		}
		if err != nil && ctx.Err() == nil {
			return last, err
		}
		for _, one := range s {
			last, have = one, true
			if one.HandshakesInProgress == 0 {
				return one, nil
			}
		}
		select {
		case <-ctx.Done():
			if !have {
				return linkkeys.MetricsLine{}, ErrNoReading
			}
			return last, ErrNoQuietReading
		case <-tick.C:
		}
	}
}

// after returns the complete METRICS lines written after offset.
func (m MetricsSource) after(offset int64) ([]linkkeys.MetricsLine, error) {
	f, err := boundedfile.OpenRegular(m.Location, boundedfile.MetricsLog)
	if err != nil {
		return nil, errorf("reading server METRICS log %s: %w", m.Location, err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil, errorf("reading server METRICS log %s: %w", m.Location, err)
	}
	b, err := io.ReadAll(io.LimitReader(f, 64<<20))
	if err != nil {
		return nil, errorf("reading server METRICS log %s: %w", m.Location, err)
	}
	// Only whole lines: the server may be mid-write.
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[:i+1]
	} else {
		return nil, nil
	}
	snaps, err := ReadMetricsLog(bytes.NewReader(b))
	if err != nil {
		return nil, errorf("reading server METRICS log %s: %w", m.Location, err)
	}
	return snaps, nil
}

func (m MetricsSource) scrape(ctx context.Context) (linkkeys.MetricsLine, error) {
	c := m.Client
	if c == nil {
		c = &http.Client{Timeout: 5 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.Location, nil)
	if err != nil {
		return linkkeys.MetricsLine{}, errorf("server metrics URL %q: %w", m.Location, err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return linkkeys.MetricsLine{}, errorf("scraping server metrics %s: %w", m.Location, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return linkkeys.MetricsLine{}, errorf("scraping server metrics %s: HTTP %s", m.Location, resp.Status)
	}
	return ParsePrometheus(resp.Body)
}
