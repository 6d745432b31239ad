package report

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/keycastresult"
	"github.com/loadproof/loadproof/internal/machine"
	"github.com/loadproof/loadproof/internal/result"
)

// The HTML report's data model: what the page's script draws, computed here in Go from the result
// files so that the page carries numbers only (per-interval percentiles, rates), never the HDR
// encodings, and stays small for long runs.

// Model is the whole page's data.
type Model struct {
	Title string `json:"title"`
	// Mode is "single", "merged", "compare", "capacity" or "live".
	Mode  string     `json:"mode"`
	Files []string   `json:"files"`
	Runs  []*RunView `json:"runs"`
	// Compare holds the headline differences of a comparison (Runs[1] against Runs[0]).
	Compare []Difference `json:"compare,omitempty"`
	// Capacity is set for an evidence bundle; its phases are bands on the run's time axis.
	Capacity *CapacityView `json:"capacity,omitempty"`
	// Live is set on the dashboard's page: where the interval events come from, and whether the run
	// has ended.
	Live *LiveView `json:"live,omitempty"`
}

// LiveView tells the page where its live feed is.
type LiveView struct {
	Events string `json:"events"`
	Ended  bool   `json:"ended"`
	// PlannedSecs is how long the run is planned to last (0: not known); TargetRate the rate it
	// aims at, operations per second (0: none, as fast as it goes). The page shows the elapsed time
	// against the first and draws the second as a line on the throughput chart.
	PlannedSecs num `json:"planned_secs,omitempty"`
	TargetRate  num `json:"target_rate,omitempty"`
}

// Headline is a run's headline figures.
type Headline struct {
	Operations int64 `json:"operations"`
	// Succeeded counts the operations served or completed; Throughput is their rate.
	Succeeded int64 `json:"succeeded"`
	// Refused counts the operations the server refused by design (its limiter or shedding
	// contract): neither failures nor throughput. RefusedBy holds them by reason where known.
	Refused   int64            `json:"refused"`
	RefusedBy map[string]int64 `json:"refused_by,omitempty"`
	// Failures counts the operations that neither succeeded nor were refused by design.
	Failures  int64 `json:"failures"`
	DurationS num   `json:"duration_s"`
	// Throughput is the rate of successful operations; OfferedRate the rate of all operations.
	Throughput  num `json:"throughput"`
	OfferedRate num `json:"offered_rate"`
	// SuccessRate is successes over the operations that were not refused by design.
	SuccessRate num               `json:"success_rate"`
	Kind        string            `json:"kind,omitempty"`
	P50Ms       num               `json:"p50_ms"`
	P90Ms       num               `json:"p90_ms"`
	P99Ms       num               `json:"p99_ms"`
	P999Ms      num               `json:"p999_ms"`
	MaxMs       num               `json:"max_ms"`
	MeanMs      num               `json:"mean_ms"`
	Stop        *result.StopEvent `json:"stop,omitempty"`
}

// Series is one named line.
type Series struct {
	Name   string `json:"name"`
	Values nums   `json:"values"`
	// pts holds the points while the model is built (row index, value); finish turns the series
	// that are kept into Values. Keeping points sparse keeps the model linear in its input: a file
	// whose every interval names new series would otherwise pad each series to every row.
	pts []pt
}

type pt struct {
	i int
	v float64
}

// MaxSeriesPerChart bounds the series one chart draws: the most significant ones are kept and the
// rest summed into one "other" series, so a file naming thousands of metrics still draws (and a
// chart with more lines than this could not be read anyway).
const MaxSeriesPerChart = 24

// LatencySeries holds one latency kind's percentiles over time.
type LatencySeries struct {
	Kind string `json:"kind"`
	// Also names the kinds identical to this one (drawn once, under Kind).
	Also []string `json:"also,omitempty"`
	P50  nums     `json:"p50"`
	P90  nums     `json:"p90"`
	P99  nums     `json:"p99"`
	P999 nums     `json:"p999"`
	Max  nums     `json:"max"`
}

// ServerGroup is one panel of server samples (memory, connections, buffers, shedding, other).
type ServerGroup struct {
	Group  string    `json:"group"`
	Unit   string    `json:"unit"`
	Series []*Series `json:"series"`
}

// Distribution is one latency kind's percentile distribution, HdrHistogram's form: the value at
// each percentile step, plotted against 1/(1-percentile) on a log axis.
type Distribution struct {
	Kind string   `json:"kind"`
	Also []string `json:"also,omitempty"`
	// Percentile is written in full: rounding would fold the steps near 100 % together.
	Percentile []float64 `json:"p"`
	Ms         nums      `json:"ms"`
}

// RunView is one run (or one merged run, or a capacity profile's phases end to end).
type RunView struct {
	Label     string            `json:"label"`
	Harness   string            `json:"harness"`
	Command   string            `json:"command"`
	Target    string            `json:"target"`
	Flags     map[string]string `json:"flags,omitempty"`
	Machines  []machine.Record  `json:"machines,omitempty"`
	Segments  []string          `json:"segments,omitempty"`
	StartedAt string            `json:"started_at,omitempty"`
	EndedAt   string            `json:"ended_at,omitempty"`
	Extra     [][2]string       `json:"extra,omitempty"`
	Cost      *CostView         `json:"cost,omitempty"` // cost.go
	Headline  Headline          `json:"headline"`
	Totals    [][2]any          `json:"totals"`
	Causes    [][2]any          `json:"causes,omitempty"`

	T           nums             `json:"t"`
	Throughput  nums             `json:"throughput"`
	Latency     []*LatencySeries `json:"latency"`
	Classes     []*Series        `json:"classes"`
	CauseSeries []*Series        `json:"cause_series"`
	Counters    []*Series        `json:"counters"`
	Connections []*Series        `json:"connections"`
	Server      []*ServerGroup   `json:"server"`
	Dist        []*Distribution  `json:"distribution"`
}

// Difference is one headline figure of a comparison.
type Difference struct {
	Figure string `json:"figure"`
	A      num    `json:"a"`
	B      num    `json:"b"`
	// ChangePct is (b − a)/a × 100; null when a is 0.
	ChangePct num `json:"change_pct"`
	// Better says which direction is an improvement: "higher" or "lower".
	Better string `json:"better"`
}

// CapacityView is an evidence bundle's verdict and phases.
type CapacityView struct {
	Profile            string `json:"profile"`
	Target             string `json:"target"`
	Scope              string `json:"scope"`
	GeneratedAt        string `json:"generated_at"`
	Passed             bool   `json:"passed"`
	CertificationReady bool   `json:"certification_ready"`
	// Rehearsal says the load went to this machine: not certifiable, whatever the checks say.
	Rehearsal         bool         `json:"rehearsal"`
	StoppedAfterPhase string       `json:"stopped_after_phase,omitempty"`
	StopReason        string       `json:"stop_reason,omitempty"`
	Blockers          []string     `json:"blockers,omitempty"`
	Phases            []*PhaseView `json:"phases"`
	// StopAt is the time on the run's axis where the run stopped early (null when every phase ran).
	StopAt num `json:"stop_at"`
}

// PhaseView is one capacity phase: its band on the time axis and its checks.
type PhaseView struct {
	Name string `json:"name"`
	// Label is the name as the chart bands show it: without the prefix all phases share.
	Label        string            `json:"label"`
	Kind         string            `json:"kind"`
	Passed       bool              `json:"passed"`
	Start        num               `json:"start"`
	End          num               `json:"end"`
	StopBreached bool              `json:"stop_breached"`
	Interrupted  bool              `json:"interrupted,omitempty"`
	Error        string            `json:"error,omitempty"`
	LiveStop     *result.StopEvent `json:"live_stop,omitempty"`
	Checks       []CheckView       `json:"checks"`
	Headline     Headline          `json:"headline"`
	// PlannedSecs is the phase's planned length and ElapsedSecs how long its load ran (0 when the
	// bundle does not record them); Overran says it ran more than twice as long as planned.
	PlannedSecs num  `json:"planned_secs"`
	ElapsedSecs num  `json:"elapsed_secs"`
	Overran     bool `json:"overran,omitempty"`
}

// CheckView is one check row.
type CheckView struct {
	Stop       bool   `json:"stop"`
	Metric     string `json:"metric"`
	Comparison string `json:"comparison"`
	Observed   num    `json:"observed"`
	Limit      num    `json:"limit"`
	Outcome    string `json:"outcome"`
}

// num is a float64 written compactly (at most three decimals), null when not finite.
type num float64

func (n num) MarshalJSON() ([]byte, error) { return appendNum(nil, float64(n)), nil }

// nums is a series written compactly; NaN is written as null (a gap).
type nums []float64

func (s nums) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 2+len(s)*6)
	b = append(b, '[')
	for i, v := range s {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendNum(b, v)
	}
	return append(b, ']'), nil
}

// UnmarshalJSON reads a series back, null as NaN.
func (s *nums) UnmarshalJSON(b []byte) error {
	var raw []*float64
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*s = make(nums, len(raw))
	for i, p := range raw {
		(*s)[i] = gap
		if p != nil {
			(*s)[i] = *p
		}
	}
	return nil
}

// UnmarshalJSON reads a number back, null as NaN.
func (n *num) UnmarshalJSON(b []byte) error {
	var p *float64
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*n = num(gap)
	if p != nil {
		*n = num(*p)
	}
	return nil
}

func appendNum(b []byte, v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return append(b, "null"...)
	}
	if a := math.Abs(v); a >= 1e15 || a == 0 {
		return strconv.AppendFloat(b, v, 'g', -1, 64)
	} else if a < 1e-3 {
		return strconv.AppendFloat(b, v, 'g', 4, 64)
	}
	return strconv.AppendFloat(b, math.Round(v*1000)/1000, 'f', -1, 64)
}

var gap = math.NaN()

// Percentiles drawn over time, in the order of LatencySeries's fields; the 100th is the max (one
// pass over the counts for all five: the histogram's own Max walks them again).
var timePercentiles = []float64{50, 90, 99, 99.9, 100}

// timeline turns interval snapshots into rows and columns. It keeps the previous server sample so
// that Prometheus counters (names ending in _total) are drawn as rates.
type timeline struct {
	prevServer map[string]float64
	// prevT is when the previous server sample was taken, on the drawn axis.
	prevT float64
	// nominal is the interval length the result records (interval_secs): the rate of an interval
	// that does not record its own length. 0 means 1 s.
	nominal float64
	// firstServer holds each server counter's first sample of the run: counters are drawn as their
	// growth since then, not as totals since the server started (which carry earlier runs).
	firstServer map[string]float64
	// attempts says each operation is a connection attempt (LinkKeys connections, handshake-bench,
	// ddos): the rows then carry attempted, established and failed connections as running totals.
	attempts bool
}

// attemptRun says whether a run's operations are connection attempts: a LinkKeys command other
// than request-bench, or any run whose classes are the LinkKeys attempt stages.
func attemptRun(harness, command string, classes []string) bool {
	if harness == "linkkeys" && command != "" && command != "request-bench" {
		return true
	}
	return slices.Contains(classes, "tcp_connect_error")
}

// Row is one interval, already reduced to what the page draws. The dashboard sends rows as its
// live events; the static report folds them into columns.
type Row struct {
	T          num               `json:"t"`
	Throughput num               `json:"thr"`
	Latency    map[string][5]num `json:"lat,omitempty"`
	Classes    map[string]num    `json:"cls,omitempty"`
	Causes     map[string]num    `json:"cau,omitempty"`
	Counters   map[string]num    `json:"ctr,omitempty"`
	// Connections holds the running totals of connection counters.
	Connections map[string]num `json:"con,omitempty"`
	// Server holds the server samples by "group|unit|name".
	Server map[string]num `json:"srv,omitempty"`
}

// connCounter says whether a driver counter counts connections (drawn as a running total).
func connCounter(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"conn", "attempt", "establish", "held", "handshake"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// serverGroup places a server sample in a panel, with its unit, by the words of its name (so that
// "established" is not read as "shed").
func serverGroup(name string) (group, unit string) {
	n := strings.ToLower(name)
	words := strings.FieldsFunc(n, func(r rune) bool { return r == '_' || r == '.' || r == ':' || r == '-' })
	has := func(ws ...string) bool {
		for _, w := range words {
			if slices.Contains(ws, w) {
				return true
			}
		}
		return false
	}
	switch {
	case has("shed", "shedding", "reject", "rejects", "rejected", "rejections", "limited", "admission", "refused", "dropped"):
		group, unit = "shedding", "count"
	case has("buffer", "buffers"):
		group, unit = "buffers", "bytes"
	case has("rss", "resident", "memory", "heap", "alloc", "bytes"):
		group, unit = "memory", "bytes"
	case has("conn", "conns", "connection", "connections", "established", "sessions", "sockets", "fds"):
		group, unit = "connections", "count"
	default:
		group, unit = "other", "value"
	}
	if strings.HasSuffix(n, "_total") {
		unit = "per second"
	}
	return group, unit
}

// serverCounter says whether a server sample only grows over the server's life (shed, rejected,
// accepted, completed, evicted: counted since the server started), as opposed to a gauge (open
// connections, resident memory, in flight).
func serverCounter(name string) bool {
	n := strings.ToLower(name)
	for _, g := range []string{"open", "inflight", "in_flight", "current", "active", "rss", "bytes", "held", "queue", "inuse", "in_use", "pending"} {
		if strings.Contains(n, g) {
			return false
		}
	}
	for _, c := range []string{"shed", "reject", "limited", "accepted", "admitted", "completed", "timeouts", "evict", "refused", "dropped", "responses", "requests", "errors", "failures"} {
		if strings.Contains(n, c) {
			return true
		}
	}
	return false
}

// row reduces iv, which starts offset seconds into the drawn axis. running holds the connection
// counters' running totals and is updated.
func (tl *timeline) row(iv *result.Interval, offset float64, running map[string]float64) Row {
	return tl.rowAt(iv, offset, running, false)
}

// rowAt is row; sampledAtEnd says iv's server sample was taken when it closed (the engine's last
// interval: the sample after the load). The engine takes every other sample when the interval
// before closes and attaches it to the next one, so a sample's time is its interval's start: a
// server counter's rate is its growth over the time between two samples, not between two rows
// (which, where the short last interval is folded into the one before, would count the growth of
// two intervals over the length of one and draw the rate doubled).
func (tl *timeline) rowAt(iv *result.Interval, offset float64, running map[string]float64, sampledAtEnd bool) Row {
	secs := iv.Secs
	if secs <= 0 {
		secs = cmp.Or(tl.nominal, 1)
	}
	sampleT := offset + iv.T
	if sampledAtEnd {
		sampleT += secs
	}
	r := Row{T: num(offset + iv.T + secs), Throughput: num(float64(iv.Total()) / secs)}
	if len(iv.Latency) > 0 {
		r.Latency = make(map[string][5]num, len(iv.Latency))
		for kind, h := range iv.Latency {
			var v [5]num
			if h.Count() == 0 {
				v = [5]num{num(gap), num(gap), num(gap), num(gap), num(gap)}
			} else {
				for i, p := range h.PercentilesMicros(timePercentiles) {
					v[i] = num(float64(p) / 1000)
				}
			}
			r.Latency[kind] = v
		}
	}
	rate := func(m map[string]int64) map[string]num {
		if len(m) == 0 {
			return nil
		}
		out := make(map[string]num, len(m))
		for k, v := range m {
			out[k] = num(float64(v) / secs)
		}
		return out
	}
	r.Classes, r.Causes = rate(iv.Counts), rate(iv.Causes)
	if tl.attempts {
		n, ok := iv.Total(), iv.Counts[result.ClassSuccess]
		running["attempted"] += float64(n)
		running["established"] += float64(ok)
		running["failed"] += float64(n - ok)
	}
	for k, v := range iv.Counters {
		if connCounter(k) {
			running[k] += float64(v)
		} else {
			if r.Counters == nil {
				r.Counters = map[string]num{}
			}
			r.Counters[k] = num(float64(v) / secs)
		}
	}
	if len(running) > 0 {
		r.Connections = make(map[string]num, len(running))
		for k, v := range running {
			r.Connections[k] = num(v)
		}
	}
	if len(iv.Server) > 0 {
		r.Server = make(map[string]num, len(iv.Server))
		for k, v := range iv.Server {
			g, u := serverGroup(k)
			key := g + "|" + u + "|" + k
			if u == "per second" {
				prev, ok := tl.prevServer[k]
				dt := sampleT - tl.prevT
				if !ok || dt <= 0 || v < prev {
					continue // the first sample of a counter (or a restart) has no rate yet
				}
				r.Server[key] = num((v - prev) / dt)
			} else if serverCounter(k) {
				if tl.firstServer == nil {
					tl.firstServer = map[string]float64{}
				}
				first, ok := tl.firstServer[k]
				if !ok || v < first {
					tl.firstServer[k], first = v, v // the first sample, or a restarted server
				}
				r.Server[key] = num(v - first)
			} else {
				r.Server[key] = num(v)
			}
		}
		tl.prevServer, tl.prevT = iv.Server, sampleT
	}
	return r
}

// columns folds rows into the run's series, padding series that start late with gaps.
type columns struct {
	rv      *RunView
	n       int
	lat     map[string]*LatencySeries
	classes map[string]*Series
	causes  map[string]*Series
	ctrs    map[string]*Series
	conns   map[string]*Series
	srv     map[string]*Series
	groups  map[string]*ServerGroup
}

func newColumns(rv *RunView) *columns {
	return &columns{rv: rv, lat: map[string]*LatencySeries{}, classes: map[string]*Series{}, causes: map[string]*Series{},
		ctrs: map[string]*Series{}, conns: map[string]*Series{}, srv: map[string]*Series{}, groups: map[string]*ServerGroup{}}
}

func pad(v nums, n int) nums {
	for len(v) < n {
		v = append(v, gap)
	}
	return v
}

func (c *columns) series(m map[string]*Series, list *[]*Series, name string) *Series {
	s := m[name]
	if s == nil {
		s = &Series{Name: name}
		m[name] = s
		*list = append(*list, s)
	}
	return s
}

// gap adds a point at t where every series is empty, so that lines break there.
func (c *columns) gap(t float64) {
	c.rv.T = append(c.rv.T, t)
	c.rv.Throughput = append(c.rv.Throughput, gap)
	c.n++
}

// foldShortTail folds a last interval much shorter than the others (the run's end cut it) into the
// one before, so that its few operations do not draw as a collapse of throughput at the end.
func foldShortTail(ivs []result.Interval, nominal float64) []result.Interval {
	n := len(ivs)
	if nominal <= 0 {
		nominal = 1
	}
	// An interval that does not record its length cannot be told short (nor its rate computed
	// from a merged length): such files are drawn as they are.
	if n < 2 || ivs[n-1].Secs >= nominal/2 || ivs[n-1].Secs <= 0 || ivs[n-2].Secs <= 0 {
		return ivs
	}
	a, b := ivs[n-2], ivs[n-1]
	f := result.Interval{T: a.T, Secs: a.Secs + b.Secs, Server: b.Server}
	if f.Server == nil {
		f.Server = a.Server
	}
	f.Counts = sumCounts(a.Counts, b.Counts)
	f.Causes = sumCounts(a.Causes, b.Causes)
	f.Counters = sumCounts(a.Counters, b.Counters)
	f.Latency = map[string]*hist.Histogram{}
	for _, m := range []map[string]*hist.Histogram{a.Latency, b.Latency} {
		for k, h := range m {
			if f.Latency[k] == nil {
				f.Latency[k] = hist.New()
			}
			f.Latency[k].Merge(h)
		}
	}
	return append(ivs[:n-2:n-2], f)
}

func sumCounts(a, b map[string]int64) map[string]int64 {
	out := make(map[string]int64, len(a)+len(b))
	for _, m := range []map[string]int64{a, b} {
		for k, v := range m {
			out[k] += v
		}
	}
	return out
}

func (c *columns) add(r Row) {
	rv := c.rv
	rv.T = append(rv.T, float64(r.T))
	rv.Throughput = append(rv.Throughput, float64(r.Throughput))
	for kind, v := range r.Latency {
		ls := c.lat[kind]
		if ls == nil {
			if len(c.lat) >= MaxSeriesPerChart {
				continue // a file naming more latency kinds than a chart can show: the first ones are drawn
			}
			ls = &LatencySeries{Kind: kind}
			c.lat[kind] = ls
			rv.Latency = append(rv.Latency, ls)
		}
		for i, p := range []*nums{&ls.P50, &ls.P90, &ls.P99, &ls.P999, &ls.Max} {
			*p = append(pad(*p, c.n), float64(v[i]))
		}
	}
	put := func(m map[string]*Series, list *[]*Series, vals map[string]num) {
		for k, v := range vals {
			s := c.series(m, list, k)
			s.pts = append(s.pts, pt{c.n, float64(v)})
		}
	}
	put(c.classes, &rv.Classes, r.Classes)
	put(c.causes, &rv.CauseSeries, r.Causes)
	put(c.ctrs, &rv.Counters, r.Counters)
	put(c.conns, &rv.Connections, r.Connections)
	for key, v := range r.Server {
		g, rest, _ := strings.Cut(key, "|")
		unit, name, _ := strings.Cut(rest, "|")
		grp := c.groups[g+"|"+unit]
		if grp == nil {
			grp = &ServerGroup{Group: g, Unit: unit}
			c.groups[g+"|"+unit] = grp
			rv.Server = append(rv.Server, grp)
		}
		s := c.srv[key]
		if s == nil {
			s = &Series{Name: name}
			c.srv[key] = s
			grp.Series = append(grp.Series, s)
		}
		s.pts = append(s.pts, pt{c.n, float64(v)})
	}
	c.n++
}

// finish pads every series to the full length and puts series in a stable order: classes in the
// harness's order, the rest by name; causes keep the most frequent few.
func (c *columns) finish(classOrder []string, causeTotals map[string]int64) {
	rv, n := c.rv, c.n
	for _, ls := range rv.Latency {
		ls.P50, ls.P90, ls.P99, ls.P999, ls.Max = pad(ls.P50, n), pad(ls.P90, n), pad(ls.P99, n), pad(ls.P999, n), pad(ls.Max, n)
	}
	slices.SortFunc(rv.Latency, func(a, b *LatencySeries) int { return cmp.Compare(kindRank(a.Kind), kindRank(b.Kind)) })
	padAll := func(list []*Series) []*Series {
		slices.SortFunc(list, func(a, b *Series) int { return strings.Compare(a.Name, b.Name) })
		list, folded := foldSeries(list, n, MaxSeriesPerChart, "other", magnitude)
		named := list
		if folded {
			named = list[:len(list)-1] // the sum stays last
		}
		slices.SortFunc(named, func(a, b *Series) int { return strings.Compare(a.Name, b.Name) })
		return list
	}
	rv.Classes = padAll(rv.Classes)
	slices.SortStableFunc(rv.Classes, func(a, b *Series) int {
		return cmp.Compare(orderOf(classOrder, a.Name), orderOf(classOrder, b.Name))
	})
	// Keep the causes that matter: the most frequent ones, the rest folded into "other causes".
	const maxCauses = 10
	slices.SortFunc(rv.CauseSeries, func(a, b *Series) int { return strings.Compare(a.Name, b.Name) })
	rv.CauseSeries, _ = foldSeries(rv.CauseSeries, n, maxCauses, "other causes", func(s *Series) float64 { return float64(causeTotals[s.Name]) })
	rv.Counters = padAll(rv.Counters)
	rv.Connections = padAll(rv.Connections)
	slices.SortFunc(rv.Server, func(a, b *ServerGroup) int {
		return cmp.Or(cmp.Compare(orderOf(groupOrder, a.Group), orderOf(groupOrder, b.Group)), strings.Compare(a.Unit, b.Unit))
	})
	for _, g := range rv.Server {
		// A series that is zero throughout says nothing (a limiter that never fired, a counter of
		// an unused feature) and is dropped, in every group.
		g.Series = slices.DeleteFunc(g.Series, func(s *Series) bool { return zeroPts(s.pts) })
		if g.Group == "other" {
			// "other" server samples can be many (runtime gauges); keep the gauges that move, and
			// every rate that is not zero (a steady rate is a figure).
			g.Series = slices.DeleteFunc(g.Series, func(s *Series) bool { return g.Unit != "per second" && flatPts(s.pts) })
			slices.SortFunc(g.Series, func(a, b *Series) int { return strings.Compare(a.Name, b.Name) })
			if len(g.Series) > 12 {
				g.Series = g.Series[:12]
			}
		}
		g.Series = padAll(g.Series)
	}
	rv.Server = slices.DeleteFunc(rv.Server, func(g *ServerGroup) bool { return len(g.Series) == 0 })
}

var groupOrder = []string{"memory", "connections", "buffers", "shedding", "other"}

// foldSeries makes the kept series dense: at most max of them, the most significant by score
// (ties by name), the rest summed point by point into one series named other. Only the kept series
// and the sum are allocated at full length, so the work is linear in the points given.
func foldSeries(list []*Series, n, max int, other string, score func(*Series) float64) (_ []*Series, folded bool) {
	dense := func(s *Series) {
		s.Values = make(nums, n)
		for i := range s.Values {
			s.Values[i] = gap
		}
		for _, p := range s.pts {
			s.Values[p.i] = p.v
		}
		s.pts = nil
	}
	if len(list) > max {
		scores := make(map[*Series]float64, len(list))
		for _, s := range list {
			scores[s] = score(s)
		}
		slices.SortStableFunc(list, func(a, b *Series) int { return cmp.Compare(scores[b], scores[a]) })
		sum := &Series{Name: other}
		acc := make(map[int]float64)
		for _, s := range list[max-1:] {
			for _, p := range s.pts {
				if !math.IsNaN(p.v) {
					acc[p.i] += p.v
				}
			}
		}
		for i, v := range acc {
			sum.pts = append(sum.pts, pt{i, v})
		}
		list = append(list[:max-1:max-1], sum)
		folded = true
	}
	for _, s := range list {
		dense(s)
	}
	return list, folded
}

// magnitude scores a series by the sum of its absolute values.
func magnitude(s *Series) float64 {
	var t float64
	for _, p := range s.pts {
		if !math.IsNaN(p.v) {
			t += math.Abs(p.v)
		}
	}
	return t
}

// zeroPts reports whether a series has no point other than zero (or a gap).
func zeroPts(ps []pt) bool {
	for _, p := range ps {
		if p.v != 0 && !math.IsNaN(p.v) {
			return false
		}
	}
	return true
}

// flatPts reports whether a series' points never change.
func flatPts(ps []pt) bool {
	v := make(nums, len(ps))
	for i, p := range ps {
		v[i] = p.v
	}
	return flat(v)
}

func flat(v nums) bool {
	first := math.NaN()
	for _, x := range v {
		if math.IsNaN(x) {
			continue
		}
		if math.IsNaN(first) {
			first = x
		} else if x != first {
			return false
		}
	}
	return true
}

func orderOf(order []string, name string) int {
	if i := slices.Index(order, name); i >= 0 {
		return i
	}
	return len(order)
}

// kindRank puts the primary latency kind first.
func kindRank(kind string) string {
	if kind == "latency" {
		return ""
	}
	return kind
}

// successKinds are the latency kinds of successful operations, in the order the headline prefers
// them: a page quotes what was served, never the latency of every attempt, refusals included.
var successKinds = []string{"latency", "connect_handshake", "request", "resumed"}

// primaryKind is the latency kind the headline quotes.
func primaryKind(h map[string]*hist.Histogram) string {
	for _, k := range successKinds {
		if lat, ok := h[k]; ok && lat != nil && lat.Count() > 0 {
			return k
		}
	}
	if _, ok := h["latency"]; ok {
		return "latency"
	}
	keys := slices.Sorted(maps.Keys(h))
	if len(keys) > 0 {
		return keys[0]
	}
	return ""
}

// headlineOf computes a run's headline. refusedBy holds refusals by design that the harness
// counted outside the envelope's refusal classes (LinkKeys: the server's accounting, request-bench's
// rate-limited answers, all within the failure classes); they are taken out of the failures,
// never more than the operations that did not succeed.
func headlineOf(totals map[string]int64, hs map[string]*hist.Histogram, elapsed time.Duration, stop *result.StopEvent, refusedBy map[string]int64) Headline {
	var h Headline
	for k, v := range totals {
		h.Operations += v
		if result.IsRefusal(k) && v > 0 {
			h.Refused += v
			if h.RefusedBy == nil {
				h.RefusedBy = map[string]int64{}
			}
			h.RefusedBy[k] += v
		}
	}
	h.Succeeded = totals[result.ClassSuccess]
	for k, v := range refusedBy {
		if v > 0 && !result.IsRefusal(k) {
			h.Refused += v
			if h.RefusedBy == nil {
				h.RefusedBy = map[string]int64{}
			}
			h.RefusedBy[k] += v
		}
	}
	h.Refused = max(min(h.Refused, h.Operations-h.Succeeded), 0)
	h.Failures = h.Operations - h.Succeeded - h.Refused
	h.DurationS = num(elapsed.Seconds())
	if elapsed > 0 {
		h.Throughput = num(float64(h.Succeeded) / elapsed.Seconds())
		h.OfferedRate = num(float64(h.Operations) / elapsed.Seconds())
	}
	h.SuccessRate = num(gap)
	if n := h.Operations - h.Refused; n > 0 {
		h.SuccessRate = num(float64(h.Succeeded) / float64(n))
	}
	h.Kind = primaryKind(hs)
	if lat := hs[h.Kind]; lat != nil && lat.Count() > 0 {
		s := lat.Summary()
		h.P50Ms, h.P90Ms, h.P99Ms, h.P999Ms, h.MaxMs, h.MeanMs = num(s.P50Ms), num(s.P90Ms), num(s.P99Ms), num(s.P999Ms), num(s.MaxMs), num(s.MeanMs)
	}
	h.Stop = stop
	return h
}

func sortedCounts(m map[string]int64, order []string) [][2]any {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b string) int {
		if order != nil {
			return cmp.Or(cmp.Compare(orderOf(order, a), orderOf(order, b)), strings.Compare(a, b))
		}
		return cmp.Or(cmp.Compare(m[b], m[a]), strings.Compare(a, b))
	})
	out := make([][2]any, len(keys))
	for i, k := range keys {
		out[i] = [2]any{k, m[k]}
	}
	return out
}

func distributions(hs map[string]*hist.Histogram) []*Distribution {
	var out []*Distribution
	for _, kind := range slices.SortedFunc(maps.Keys(hs), func(a, b string) int { return strings.Compare(kindRank(a), kindRank(b)) }) {
		h := hs[kind]
		if h == nil || h.Count() == 0 {
			continue
		}
		if len(out) == MaxSeriesPerChart {
			break // the most telling kinds first (kindRank); a chart cannot show more
		}
		d := &Distribution{Kind: kind}
		for _, p := range h.Distribution(5) {
			if p.Percentile >= 1 {
				continue // 1/(1-p) is infinite: the plotter leaves the 100 % step out too
			}
			d.Percentile = append(d.Percentile, p.Percentile)
			d.Ms = append(d.Ms, float64(p.ValueUs)/1000)
		}
		out = append(out, d)
	}
	return out
}

func timeString(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// part is one piece of a run's time axis: an envelope whose intervals start offset seconds in.
type part struct {
	env    *result.Envelope
	offset float64
}

// runView draws one run from the parts of its time axis; env holds the run's whole figures.
func runView(label string, env *result.Envelope, parts []part, stop *result.StopEvent, refused map[string]int64) *RunView {
	rv := &RunView{
		Label: label, Harness: env.Harness, Command: env.Command, Target: env.Target, Flags: env.Flags,
		Machines: env.Machines, StartedAt: timeString(env.StartedAt), EndedAt: timeString(env.EndedAt),
		Totals: sortedCounts(env.Totals, env.Classes), Causes: sortedCounts(env.Causes, nil),
		Headline: headlineOf(env.Totals, env.Histograms, env.Elapsed(), stop, refused),
	}
	for _, s := range env.Segments {
		rv.Segments = append(rv.Segments, s.String())
	}
	rv.Extra = append(rv.Extra, validityExtra(env.Machines)...)
	rv.Cost = costView(env)
	n := 0
	for _, p := range parts {
		n += len(p.env.Intervals)
	}
	rv.T, rv.Throughput = make(nums, 0, n), make(nums, 0, n)
	cols := newColumns(rv)
	cols.n = 0
	for i, p := range parts {
		if i > 0 {
			cols.gap(p.offset) // a pause between phases is a gap, not a line across it
		}
		tl := timeline{attempts: attemptRun(env.Harness, env.Command, env.Classes), nominal: p.env.IntervalSecs}
		running := map[string]float64{}
		ivs := foldShortTail(p.env.Intervals, p.env.IntervalSecs)
		for j := range ivs {
			cols.add(tl.rowAt(&ivs[j], p.offset, running, j == len(ivs)-1))
		}
	}
	cols.finish(env.Classes, env.Causes)
	rv.Dist = distributions(env.Histograms)
	sameKinds(rv, env.Histograms)
	return rv
}

// sameKinds draws a latency kind identical to another (the same histogram over the run, the same
// percentiles in every interval: a handshake-bench whose every attempt succeeded times attempt and
// connect_handshake alike) once: under the name the headline would quote (a success kind before
// "attempt"), the other names listed in its Also.
func sameKinds(rv *RunView, hs map[string]*hist.Histogram) {
	same := func(a, b string) bool {
		ha, hb := hs[a], hs[b]
		return ha != nil && hb != nil && ha.Count() > 0 && slices.Equal(ha.Buckets(), hb.Buckets())
	}
	rank := func(kind string) int { return orderOf(successKinds, kind) }
	into := map[string]string{} // a kind drawn under another's name -> that name
	var kept []*LatencySeries
	for _, ls := range rv.Latency {
		i := slices.IndexFunc(kept, func(k *LatencySeries) bool { return same(k.Kind, ls.Kind) && sameSeries(k, ls) })
		if i < 0 {
			kept = append(kept, ls)
			continue
		}
		k := kept[i]
		if rank(ls.Kind) < rank(k.Kind) {
			ls.Also = append(append(ls.Also, k.Kind), k.Also...)
			k.Also = nil
			for a, b := range into {
				if b == k.Kind {
					into[a] = ls.Kind
				}
			}
			into[k.Kind] = ls.Kind
			kept[i] = ls
		} else {
			k.Also = append(k.Also, ls.Kind)
			into[ls.Kind] = k.Kind
		}
	}
	rv.Latency = kept
	also := map[string][]string{}
	for _, k := range kept {
		also[k.Kind] = k.Also
	}
	rv.Dist = slices.DeleteFunc(rv.Dist, func(d *Distribution) bool { _, gone := into[d.Kind]; return gone })
	for _, d := range rv.Dist {
		d.Also = also[d.Kind]
	}
}

// sameSeries reports whether two latency kinds draw the same lines.
func sameSeries(a, b *LatencySeries) bool {
	eq := func(x, y nums) bool {
		return slices.EqualFunc(x, y, func(p, q float64) bool { return p == q || math.IsNaN(p) && math.IsNaN(q) })
	}
	return eq(a.P50, b.P50) && eq(a.P90, b.P90) && eq(a.P99, b.P99) && eq(a.P999, b.P999) && eq(a.Max, b.Max)
}

// keycastExtra lists a Keycast results file's own figures for the run's details.
func keycastExtra(r *keycastresult.Results) [][2]string {
	m := r.Metadata
	out := [][2]string{{"Scenario", m.Scenario}, {"Method", m.Method}, {"Concurrency", strconv.Itoa(m.Concurrency)},
		{"Users", strconv.Itoa(m.UserCount)}, {"Seed", strconv.FormatUint(m.Seed, 10)}}
	if om := r.OpenModel; om != nil {
		out = append(out, [2]string{"Target rate", f1(om.TargetRate) + " req/s"},
			[2]string{"Late sends", strconv.FormatUint(om.LateSends, 10)}, [2]string{"Dropped", strconv.FormatUint(om.Dropped, 10)})
	}
	out = append(out, [2]string{"Cache hit ratio (estimated)", f1(r.Summary.CacheHitRatio*100) + " %"},
		[2]string{"Unintentional error rate", f1(r.Summary.UnintentionalErrorRate*100) + " %"},
		[2]string{"Intentional shedding (503)", fmt.Sprintf("%d (%s %%)", r.Summary.IntentionalRejections, f1(r.Summary.IntentionalRejectionRate*100))})
	return out
}

// difference builds the comparison rows of two runs' headlines.
func differences(a, b Headline) []Difference {
	row := func(figure string, x, y num, better string) Difference {
		d := Difference{Figure: figure, A: x, B: y, ChangePct: num(gap), Better: better}
		if x != 0 && !math.IsNaN(float64(x)) {
			d.ChangePct = (y - x) / x * 100
		}
		return d
	}
	return []Difference{
		row("Operations", num(a.Operations), num(b.Operations), "higher"),
		row("Throughput (ops/s)", a.Throughput, b.Throughput, "higher"),
		row("Success rate (%)", a.SuccessRate*100, b.SuccessRate*100, "higher"),
		row("Failures", num(a.Failures), num(b.Failures), "lower"),
		row("Latency p50 (ms)", a.P50Ms, b.P50Ms, "lower"),
		row("Latency p90 (ms)", a.P90Ms, b.P90Ms, "lower"),
		row("Latency p99 (ms)", a.P99Ms, b.P99Ms, "lower"),
		row("Latency p99.9 (ms)", a.P999Ms, b.P999Ms, "lower"),
		row("Latency max (ms)", a.MaxMs, b.MaxMs, "lower"),
	}
}

// encodeModel writes the model as JSON safe to embed in a <script> element (json.Marshal escapes
// <, > and &).
func encodeModel(m *Model) ([]byte, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("report: encoding the page's data: %w", err)
	}
	return b, nil
}
