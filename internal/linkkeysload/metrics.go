package linkkeysload

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/loadproof/loadproof/internal/linkkeys"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// MetricsPrefix starts every METRICS line the server prints (linkkeys.MetricsPrefix).
const MetricsPrefix = linkkeys.MetricsPrefix

// Snapshot is one reading of the server's counters and gauges: a parsed METRICS line
// (docs/protocol-linkkeys.md, METRICS line) or a scrape of its Prometheus endpoint. It has the
// fields of linkkeys.MetricsLine: the fields a server appends after process_rss_bytes are
// EstablishedTotal, ParkedConnections and RateLimitedResponses when it prints them, and Extra for
// any other numeric ones.
type Snapshot linkkeys.MetricsLine

// maxMetricsLine bounds the line length we accept; a real line is about 600 bytes.
const maxMetricsLine = linkkeys.MaxMetricsLineBytes

// ParseMetricsLine parses one METRICS line with the rules of linkkeys.ParseMetricsLine: the literal
// prefix "METRICS " and one compact JSON object whose first fifteen keys are the upstream fields in
// that order; later keys (a server may append fields) fill the appended fields or, when
// unknown and numeric, Extra. A trailing newline is allowed.
func ParseMetricsLine(line string) (Snapshot, error) {
	m, err := linkkeys.ParseMetricsLine(line)
	if err != nil {
		return Snapshot{}, errorf("%w", err)
	}
	return Snapshot(m), nil
}

// Admitted returns the server's count of connections that passed admission (the limiter) by this
// snapshot, when the server reports one (an appended "admitted" or "handshakes_admitted" field), and
// otherwise accepted minus the sheds, which is the same number for a server whose accounting holds.
func (s Snapshot) Admitted() uint64 {
	for _, k := range []string{"admitted", "handshakes_admitted", "admitted_connections"} {
		if v, ok := s.Extra[k]; ok {
			return uint64(v)
		}
	}
	shed := s.ShedConnectionLimit + s.ShedHandshakePerSource + s.ShedHandshakeOverflow + s.ShedHandshakeGlobal
	if shed > s.AcceptedConnections {
		return 0
	}
	return s.AcceptedConnections - shed
}

// HandshakesCompleted returns the server's cumulative count of completed TLS handshakes, when it
// reports one (established_total, or a numeric field of another common name in Extra); ok is false
// otherwise (established_connections is a gauge and cannot stand in).
func (s Snapshot) HandshakesCompleted() (uint64, bool) {
	if v, ok := s.Extra["handshakes_completed"]; ok {
		return uint64(v), true
	}
	if s.EstablishedTotal != nil {
		return *s.EstablishedTotal, true
	}
	// "established_total" in Extra: a result file written before the field was typed.
	for _, k := range []string{"established_total", "established", "handshakes_ok"} {
		if v, ok := s.Extra[k]; ok {
			return uint64(v), true
		}
	}
	return 0, false
}

// ReadMetricsLog returns every METRICS line in a server log, in order, skipping the log's other
// lines. A line that starts with the prefix but does not parse is an error.
func ReadMetricsLog(r io.Reader) ([]Snapshot, error) {
	var out []Snapshot
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), maxMetricsLine+1)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if !strings.HasPrefix(line, MetricsPrefix) {
			continue
		}
		s, err := ParseMetricsLine(line)
		if err != nil {
			return out, fmt.Errorf("line %d: %w", n, err)
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

// promNames maps Prometheus metric names (after an optional "linkkeys_" namespace and "_total"
// suffix are removed) to METRICS fields.
var promAliases = map[string]string{
	"process_resident_memory_bytes": "process_rss_bytes",
	"process_rss_bytes":             "process_rss_bytes",
}

// ParsePrometheus reads a Prometheus text exposition and returns the server counters it contains as
// a Snapshot. Names are matched after removing a "linkkeys_server_", "linkkeys_tcp_" or "linkkeys_"
// namespace and a "_total" suffix; shed counters may also come as one family with a reason label
// (shed_connections_total{reason="handshake_global"} is shed_handshake_global); the standard
// process_resident_memory_bytes is process_rss_bytes. Other unlabelled samples land in Extra. At
// least accepted_connections must be present.
func ParsePrometheus(r io.Reader) (Snapshot, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(io.LimitReader(r, 16<<20))
	if err != nil {
		return Snapshot{}, errorf("reading Prometheus metrics: %v", err)
	}
	s := Snapshot{Label: "scrape"}
	found := false
	names := make([]string, 0, len(fams))
	for n := range fams {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		base := promKey(name)
		if alias, ok := promAliases[name]; ok {
			base = alias
		}
		// The client_model types are used through their getters only, so this package does not
		// import client_model directly.
		for _, m := range fams[name].GetMetric() {
			key := base
			switch labels := m.GetLabel(); {
			case len(labels) == 0:
			case len(labels) == 1 && base == "shed_connections" && labels[0].GetName() == "reason":
				key = "shed_" + labels[0].GetValue()
			default:
				continue
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
			if key == "process_rss_bytes" {
				if v >= 0 && v < math.MaxUint64 {
					u := uint64(v)
					s.ProcessRSSBytes = &u
				}
				continue
			}
			if linkkeys.IsMetricsCounter(key) {
				if v < 0 || math.IsNaN(v) || v >= math.MaxUint64 {
					return Snapshot{}, errorf("reading Prometheus metrics: %s = %v is not a count", name, v)
				}
				(*linkkeys.MetricsLine)(&s).SetCounter(key, uint64(v))
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
		return Snapshot{}, errorf("reading Prometheus metrics: no accepted_connections counter (looked for linkkeys_server_accepted_connections_total and similar); is this a LinkKeys server's /metrics?")
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
func (m MetricsSource) Latest(ctx context.Context) (Snapshot, error) {
	if m.IsURL() {
		return m.scrape(ctx)
	}
	b, err := os.ReadFile(m.Location)
	if err != nil {
		return Snapshot{}, errorf("reading server METRICS log %s: %w", m.Location, err)
	}
	snaps, err := ReadMetricsLog(bytes.NewReader(b))
	if err != nil {
		return Snapshot{}, errorf("reading server METRICS log %s: %w", m.Location, err)
	}
	if len(snaps) == 0 {
		return Snapshot{}, errorf("server METRICS log %s holds no METRICS line yet; is it the server's stdout?", m.Location)
	}
	return snaps[len(snaps)-1], nil
}

// Quiet marks the source now and waits for the first reading after the mark with no handshake in
// progress (see Settled). Taken before a run, it makes sure earlier traffic is fully counted before
// the run starts; taken after, that the run's own attempts are.
func (m MetricsSource) Quiet(ctx context.Context, wait time.Duration) (Snapshot, error) {
	mark, err := m.Mark()
	if err != nil {
		return Snapshot{}, err
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
func (m MetricsSource) Settled(ctx context.Context, mark Mark, wait time.Duration) (Snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last Snapshot
	have := false
	for {
		var s []Snapshot
		var err error
		if m.IsURL() {
			var one Snapshot
			one, err = m.scrape(ctx)
			s = []Snapshot{one}
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
				return Snapshot{}, ErrNoReading
			}
			return last, ErrNoQuietReading
		case <-tick.C:
		}
	}
}

// after returns the complete METRICS lines written after offset.
func (m MetricsSource) after(offset int64) ([]Snapshot, error) {
	f, err := os.Open(m.Location)
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

func (m MetricsSource) scrape(ctx context.Context) (Snapshot, error) {
	c := m.Client
	if c == nil {
		c = &http.Client{Timeout: 5 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.Location, nil)
	if err != nil {
		return Snapshot{}, errorf("server metrics URL %q: %w", m.Location, err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return Snapshot{}, errorf("scraping server metrics %s: %w", m.Location, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Snapshot{}, errorf("scraping server metrics %s: HTTP %s", m.Location, resp.Status)
	}
	return ParsePrometheus(resp.Body)
}
