package linkkeys

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// upstreamMetricsLine is a line in the upstream Rust load-test server's
// documented shape, written by hand: the 15 fields of
// docs/protocol-linkkeys.md, METRICS line, and nothing after them.
const upstreamMetricsLine = `METRICS {"label":"running","elapsed_secs":5.001,"accepted_connections":12017,"open_connections":3,"established_connections":2,"handshakes_in_progress":1,"handshake_timeouts":0,"handshake_rejections":23,"shed_connection_limit":0,"shed_handshake_per_source":0,"shed_handshake_overflow":1955,"shed_handshake_global":8963,"frames_processed":7,"frame_buffer_bytes":0,"process_rss_bytes":28311552}`

// ourMetricsLine is a line as the loadproof server prints it, with every
// appended field.
const ourMetricsLine = `METRICS {"label":"running","elapsed_secs":5.001234567,"accepted_connections":1,"open_connections":2,"established_connections":3,"handshakes_in_progress":4,"handshake_timeouts":5,"handshake_rejections":6,"shed_connection_limit":7,"shed_handshake_per_source":8,"shed_handshake_overflow":9,"shed_handshake_global":10,"frames_processed":11,"frame_buffer_bytes":12,"process_rss_bytes":13,"established_total":14,"parked_connections":15,"rate_limited_responses":16` + newFields + rssSplitFields + hostTCPFields + `}`

// preHostMetricsLine is a line of a loadproof server from before the host
// TCP counters: every appended field up to process_rss_shmem_bytes.
const preHostMetricsLine = `METRICS {"label":"running","elapsed_secs":5.001234567,"accepted_connections":1,"open_connections":2,"established_connections":3,"handshakes_in_progress":4,"handshake_timeouts":5,"handshake_rejections":6,"shed_connection_limit":7,"shed_handshake_per_source":8,"shed_handshake_overflow":9,"shed_handshake_global":10,"frames_processed":11,"frame_buffer_bytes":12,"process_rss_bytes":13,"established_total":14,"parked_connections":15,"rate_limited_responses":16` + newFields + rssSplitFields + `}`

// olderMetricsLine is a line of a loadproof server from before the closed_*
// counters: the first three appended fields only.
const olderMetricsLine = `METRICS {"label":"running","elapsed_secs":5.001234567,"accepted_connections":1,"open_connections":2,"established_connections":3,"handshakes_in_progress":4,"handshake_timeouts":5,"handshake_rejections":6,"shed_connection_limit":7,"shed_handshake_per_source":8,"shed_handshake_overflow":9,"shed_handshake_global":10,"frames_processed":11,"frame_buffer_bytes":12,"process_rss_bytes":13,"established_total":14,"parked_connections":15,"rate_limited_responses":16}`

// preSplitMetricsLine is a line of a loadproof server from before the
// resident memory split: every appended field up to closed_shutdown.
const preSplitMetricsLine = `METRICS {"label":"running","elapsed_secs":5.001234567,"accepted_connections":1,"open_connections":2,"established_connections":3,"handshakes_in_progress":4,"handshake_timeouts":5,"handshake_rejections":6,"shed_connection_limit":7,"shed_handshake_per_source":8,"shed_handshake_overflow":9,"shed_handshake_global":10,"frames_processed":11,"frame_buffer_bytes":12,"process_rss_bytes":13,"established_total":14,"parked_connections":15,"rate_limited_responses":16` + newFields + `}`

// rssSplitFields split process_rss_bytes by kind, appended after closed_shutdown.
const rssSplitFields = `,"process_rss_anon_bytes":26,"process_rss_file_bytes":27,"process_rss_shmem_bytes":28`

// hostTCPFields are the server host's TCP counters, appended after the RSS split.
const hostTCPFields = `,"host_tcp_listen_overflows":29,"host_tcp_listen_drops":30,"host_tcp_retrans_segs":31,"host_tcp_dsack_recv":32,"host_tcp_syncookies_sent":33`

// newFields are the closed_* counters, appended after rate_limited_responses.
const newFields = `,"closed_by_peer":17,"closed_oversized_frame":18,"closed_malformed_request":19,"closed_idle_timeout":20,"closed_io_timeout":21,"closed_slow_frame_body":22,"closed_frame_budget":23,"closed_oversized_response":24,"closed_shutdown":25`

func sampleMetricsLine() MetricsLine {
	return MetricsLine{
		Label: "running", ElapsedSecs: 5.001234567, AcceptedConnections: 1, OpenConnections: 2, EstablishedConnections: 3,
		HandshakesInProgress: 4, HandshakeTimeouts: 5, HandshakeRejections: 6, ShedConnectionLimit: 7,
		ShedHandshakePerSource: 8, ShedHandshakeOverflow: 9, ShedHandshakeGlobal: 10, FramesProcessed: 11,
		FrameBufferBytes: 12, ProcessRSSBytes: ptr[uint64](13), EstablishedTotal: 14,
		ParkedConnections: 15, RateLimitedResponses: 16, ClosedByPeer: 17, ClosedOversizedFrame: 18,
		ClosedMalformedRequest: 19, ClosedIdleTimeout: 20, ClosedIOTimeout: 21, ClosedSlowFrameBody: 22,
		ClosedFrameBudget: 23, ClosedOversizedResponse: 24, ClosedShutdown: 25,
		ProcessRSSAnonBytes: 26, ProcessRSSFileBytes: 27, ProcessRSSShmemBytes: 28,
		HostTCPListenOverflows: 29, HostTCPListenDrops: 30, HostTCPRetransSegs: 31, HostTCPDSACKRecv: 32, HostTCPSyncookiesSent: 33,
	}
}

// preHostSample is preHostMetricsLine parsed: the host TCP counters absent.
func preHostSample() MetricsLine {
	m := sampleMetricsLine()
	m.HostTCPListenOverflows, m.HostTCPListenDrops, m.HostTCPRetransSegs, m.HostTCPDSACKRecv, m.HostTCPSyncookiesSent = 0, 0, 0, 0, 0
	m.Absent = HostTCPFields[:]
	return m
}

// preSplitSample is preSplitMetricsLine parsed: the RSS split and the host
// TCP counters absent.
func preSplitSample() MetricsLine {
	m := preHostSample()
	m.ProcessRSSAnonBytes, m.ProcessRSSFileBytes, m.ProcessRSSShmemBytes = 0, 0, 0
	m.Absent = slices.Concat(RSSSplitFields[:], HostTCPFields[:])
	return m
}

// olderSample is olderMetricsLine parsed: the closed_* counters absent.
func olderSample() MetricsLine {
	m := WithoutAppended(sampleMetricsLine())
	m.EstablishedTotal, m.ParkedConnections, m.RateLimitedResponses = 14, 15, 16
	m.Absent = AppendedMetricsFields()[3:]
	return m
}

// upstreamSample is upstreamMetricsLine parsed: every appended field absent.
func upstreamSample() MetricsLine {
	return MetricsLine{
		Label: "running", ElapsedSecs: 5.001, AcceptedConnections: 12017, OpenConnections: 3, EstablishedConnections: 2,
		HandshakesInProgress: 1, HandshakeRejections: 23, ShedHandshakeOverflow: 1955, ShedHandshakeGlobal: 8963,
		FramesProcessed: 7, ProcessRSSBytes: ptr[uint64](28311552), Absent: AppendedMetricsFields(),
	}
}

func TestAppendMetricsLine(t *testing.T) {
	full := sampleMetricsLine()
	upstream := upstreamSample()
	older := olderSample()
	nullRSS := full
	nullRSS.Label, nullRSS.ElapsedSecs, nullRSS.ProcessRSSBytes = "final", 0, nil
	extra := full
	extra.Extra = map[string]float64{"zeta": 2, "alpha": 0.5, "accepted_connections": 99, "big": 1e21, "bad": math.NaN()}
	partial := upstream
	partial.SetCounter("parked_connections", 0)
	for _, tc := range []struct {
		name string
		m    MetricsLine
		want string
	}{
		{"ours", full, ourMetricsLine},
		{"upstream", upstream, upstreamMetricsLine},
		{"older loadproof", older, olderMetricsLine},
		{"loadproof before the RSS split", preSplitSample(), preSplitMetricsLine},
		{"loadproof before the host TCP counters", preHostSample(), preHostMetricsLine},
		{"null rss, whole elapsed", nullRSS, strings.Replace(strings.Replace(ourMetricsLine, `"running","elapsed_secs":5.001234567`, `"final","elapsed_secs":0.0`, 1), `"process_rss_bytes":13`, `"process_rss_bytes":null`, 1)},
		{"extra sorted, named keys skipped", extra, strings.TrimSuffix(ourMetricsLine, "}") + `,"alpha":0.5,"bad":null,"big":1e+21,"zeta":2}`},
		{"one appended field", partial, strings.TrimSuffix(upstreamMetricsLine, "}") + `,"parked_connections":0}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := string(AppendMetricsLine([]byte("x"), tc.m))
			if got != "x"+tc.want {
				t.Errorf("got  %s\nwant x%s", got, tc.want)
			}
		})
	}
}

func TestAppendSerdeFloat(t *testing.T) {
	for _, tc := range []struct {
		f    float64
		want string
	}{
		{0, "0.0"}, {math.Copysign(0, -1), "-0.0"}, {5, "5.0"}, {120, "120.0"}, {0.25, "0.25"}, {3.001234567, "3.001234567"},
		{0.000128732, "0.000128732"}, {0.0001, "0.0001"}, {0.00001, "0.00001"}, {0.000001, "1e-6"}, {1.5e-7, "1.5e-7"},
		{1e15, "1000000000000000.0"}, {1e16, "1e16"}, {1.5e16, "1.5e16"}, {123456789.125, "123456789.125"},
		{-2, "-2.0"}, {math.Inf(1), "null"}, {math.NaN(), "null"},
	} {
		if got := string(AppendSerdeFloat(nil, tc.f)); got != tc.want {
			t.Errorf("AppendSerdeFloat(%v) = %q, want %q", tc.f, got, tc.want)
		}
	}
}

func TestSerdeFloatRoundTrips(t *testing.T) {
	for _, f := range []float64{1e-9, 0.1, 1.0 / 3, 12345.678, 9.999999e15, 1e20, 4.9e-324, math.MaxFloat64} {
		s := string(AppendSerdeFloat(nil, f))
		g, err := strconv.ParseFloat(s, 64)
		if err != nil || g != f {
			t.Errorf("%v -> %q -> %v, %v", f, s, g, err)
		}
	}
}

func TestParseMetricsLine(t *testing.T) {
	for _, tc := range []struct {
		name string
		line string
		want MetricsLine
	}{
		{"ours", ourMetricsLine + "\n", sampleMetricsLine()},
		{"crlf", ourMetricsLine + "\r\n", sampleMetricsLine()},
		{"upstream", upstreamMetricsLine, upstreamSample()},
		{"older loadproof", olderMetricsLine, olderSample()},
		{"loadproof before the RSS split", preSplitMetricsLine, preSplitSample()},
		{"loadproof before the host TCP counters", preHostMetricsLine, preHostSample()},
		{"null rss, appended null, extras", strings.Replace(upstreamMetricsLine, `"process_rss_bytes":28311552}`,
			`"process_rss_bytes":null,"note":"x","rate_limited_responses":4,"established_total":null,"admitted":10000,"nested":{"a":1},"huge":1e400}`, 1),
			MetricsLine{
				Label: "running", ElapsedSecs: 5.001, AcceptedConnections: 12017, OpenConnections: 3, EstablishedConnections: 2,
				HandshakesInProgress: 1, HandshakeRejections: 23, ShedHandshakeOverflow: 1955, ShedHandshakeGlobal: 8963,
				FramesProcessed: 7, RateLimitedResponses: 4, Extra: map[string]float64{"admitted": 10000},
				Absent: slices.DeleteFunc(AppendedMetricsFields(), func(n string) bool { return n == "rate_limited_responses" }),
			}},
		{"spaces between tokens", "METRICS { " + strings.ReplaceAll(strings.TrimPrefix(upstreamMetricsLine, "METRICS {"), ",", " , ") + " ",
			func() MetricsLine { m, _ := ParseMetricsLine(upstreamMetricsLine); return m }()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseMetricsLine(tc.line)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestParseMetricsLineRejects(t *testing.T) {
	good := ourMetricsLine
	for _, tc := range []struct {
		name, line, want string
	}{
		{"other line", "listening on 127.0.0.1:1 pid=2", "not a METRICS line"},
		{"no prefix", strings.TrimPrefix(good, MetricsPrefix), "not a METRICS line"},
		{"no space", "METRICS{}", "not a METRICS line"},
		{"empty", "METRICS ", "ends before the object is closed"},
		{"not json", "METRICS {", "ends before the object is closed"},
		{"garbage", "METRICS {oops", "invalid JSON object"},
		{"array", "METRICS []", "holds an array"},
		{"string", `METRICS "x"`, "holds a string"},
		{"unterminated", strings.TrimSuffix(good, "}"), "ends before the object is closed"},
		{"missing field", strings.Replace(good, `"frames_processed":11,`, "", 1), "missing required fields [frames_processed]"},
		{"empty object", "METRICS {}", "missing required fields [label elapsed_secs"},
		{"wrong order", strings.Replace(good, `"label":"running","elapsed_secs":5.001234567`, `"elapsed_secs":5.001234567,"label":"running"`, 1), `field "label" comes after "elapsed_secs"`},
		{"appended before upstream", strings.Replace(good, `{"label":"running",`, `{"established_total":1,"label":"running",`, 1), `field "label" comes after "established_total"`},
		{"unknown before upstream", strings.Replace(good, `"frames_processed":11,`, `"x":1,"frames_processed":11,`, 1), `field "frames_processed" comes after "x"`},
		{"duplicate", strings.Replace(good, `}`, `,"label":"final"}`, 1), `field "label" appears twice`},
		{"duplicate appended", strings.Replace(good, `}`, `,"parked_connections":1}`, 1), `field "parked_connections" appears twice`},
		{"duplicate unknown", strings.Replace(good, `}`, `,"x":1,"x":"y"}`, 1), `field "x" appears twice`},
		{"negative", strings.Replace(good, `"open_connections":2`, `"open_connections":-2`, 1), "open_connections is -2: must be a whole number"},
		{"fraction", strings.Replace(good, `"open_connections":2`, `"open_connections":2.5`, 1), "open_connections is 2.5"},
		{"exponent", strings.Replace(good, `"open_connections":2`, `"open_connections":2e3`, 1), "open_connections is 2e3"},
		{"string counter", strings.Replace(good, `"open_connections":2`, `"open_connections":"2"`, 1), `open_connections is "2"`},
		{"null counter", strings.Replace(good, `"open_connections":2`, `"open_connections":null`, 1), `open_connections is null`},
		{"overflow", strings.Replace(good, `"frames_processed":11`, `"frames_processed":18446744073709551616`, 1), "frames_processed is 18446744073709551616"},
		{"bad appended", strings.Replace(good, `"parked_connections":15`, `"parked_connections":-1`, 1), "parked_connections is -1"},
		{"bad label", strings.Replace(good, `"running"`, `"sleeping"`, 1), `label is "sleeping"`},
		{"label number", strings.Replace(good, `"label":"running"`, `"label":1`, 1), "label is 1"},
		{"bad rss", strings.Replace(good, `"process_rss_bytes":13`, `"process_rss_bytes":"13"`, 1), `process_rss_bytes is "13"`},
		{"negative elapsed", strings.Replace(good, `5.001234567`, `-1`, 1), "elapsed_secs is -1"},
		{"huge elapsed", strings.Replace(good, `5.001234567`, `1e400`, 1), "elapsed_secs is 1e400"},
		{"string elapsed", strings.Replace(good, `5.001234567`, `"5"`, 1), `elapsed_secs is "5"`},
		{"trailing", good + " x", "1 unexpected bytes after the JSON object"},
		{"second object", good + " {}", "2 unexpected bytes"},
		{"too long", MetricsPrefix + strings.Repeat(" ", MaxMetricsLineBytes), "longer than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseMetricsLine(tc.line)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "linkkeys: ") {
				t.Errorf("error without package prefix: %v", err)
			}
			if notMetrics := strings.Contains(tc.want, "not a METRICS line"); errors.Is(err, ErrNotMetricsLine) != notMetrics {
				t.Errorf("errors.Is(err, ErrNotMetricsLine) = %v, want %v", !notMetrics, notMetrics)
			}
		})
	}
}

func TestSetCounter(t *testing.T) {
	var m MetricsLine
	for i, f := range MetricsFields() {
		name := f.Name
		if !IsMetricsCounter(name) || !m.SetCounter(name, uint64(100+i)) {
			t.Fatalf("%s is not a counter", name)
		}
	}
	for _, name := range []string{"label", "elapsed_secs", "admitted", ""} {
		if IsMetricsCounter(name) || m.SetCounter(name, 1) {
			t.Errorf("%q taken as a counter", name)
		}
	}
	// Every whole-number field landed in its own place, in order.
	want := `"accepted_connections":100,"open_connections":101,"established_connections":102,"handshakes_in_progress":103,"handshake_timeouts":104,"handshake_rejections":105,"shed_connection_limit":106,"shed_handshake_per_source":107,"shed_handshake_overflow":108,"shed_handshake_global":109,"frames_processed":110,"frame_buffer_bytes":111,"process_rss_bytes":112,"established_total":113,"parked_connections":114,"rate_limited_responses":115,"closed_by_peer":116,"closed_oversized_frame":117,"closed_malformed_request":118,"closed_idle_timeout":119,"closed_io_timeout":120,"closed_slow_frame_body":121,"closed_frame_budget":122,"closed_oversized_response":123,"closed_shutdown":124,"process_rss_anon_bytes":125,"process_rss_file_bytes":126,"process_rss_shmem_bytes":127,"host_tcp_listen_overflows":128,"host_tcp_listen_drops":129,"host_tcp_retrans_segs":130,"host_tcp_dsack_recv":131,"host_tcp_syncookies_sent":132}`
	if got := string(AppendMetricsLine(nil, m)); !strings.HasSuffix(got, want) {
		t.Errorf("got %s", got)
	}
}

func FuzzParseMetricsLine(f *testing.F) {
	f.Add(ourMetricsLine)
	f.Add(olderMetricsLine)
	f.Add(preSplitMetricsLine)
	f.Add(preHostMetricsLine)
	f.Add(upstreamMetricsLine + "\n")
	f.Add(strings.Replace(upstreamMetricsLine, `28311552}`, `null,"established_total":5,"note":"x","admitted":1.5e3}`, 1))
	f.Add(`METRICS {"label":"final","elapsed_secs":1e-5,"accepted_connections":0,"open_connections":0,"established_connections":0,"handshakes_in_progress":0,"handshake_timeouts":0,"handshake_rejections":0,"shed_connection_limit":0,"shed_handshake_per_source":0,"shed_handshake_overflow":0,"shed_handshake_global":0,"frames_processed":0,"frame_buffer_bytes":0,"process_rss_bytes":null}`)
	f.Add(strings.TrimSuffix(ourMetricsLine, "}") + `,"source_held_accepted":3,"source_held_shed_handshake_per_source":1,"source_ddos-1_closed_by_peer":2,"source_x_bogus":1,"source_y_admitted":null}`)
	f.Add(strings.TrimSuffix(upstreamMetricsLine, "}") + `,"source_a_b_established":18446744073709551615,"source_a_b_established":1}`)
	f.Add("METRICS {}")
	f.Add("METRICS ")
	f.Add(`METRICS {"label":1}`)
	f.Add("hello")
	f.Fuzz(func(t *testing.T, line string) {
		m, err := ParseMetricsLine(line)
		if err != nil {
			if strings.HasPrefix(line, MetricsPrefix) == errors.Is(err, ErrNotMetricsLine) && len(line) <= MaxMetricsLineBytes {
				t.Fatalf("ErrNotMetricsLine mismatch for %q: %v", line, err)
			}
			return
		}
		if m.Label != "running" && m.Label != "final" || m.ElapsedSecs < 0 || math.IsInf(m.ElapsedSecs, 0) || math.IsNaN(m.ElapsedSecs) {
			t.Fatalf("accepted label %q elapsed %v from %q", m.Label, m.ElapsedSecs, line)
		}
		// Whatever parses formats to a line that parses to the same value.
		out := AppendMetricsLine(nil, m)
		again, err := ParseMetricsLine(string(out))
		if err != nil {
			t.Fatalf("re-parse of %s: %v", out, err)
		}
		if !reflect.DeepEqual(again, m) {
			t.Fatalf("round trip differs:\n%+v\n%+v", again, m)
		}
		if out2 := AppendMetricsLine(nil, again); string(out2) != string(out) {
			t.Fatalf("format not stable:\n%s\n%s", out, out2)
		}
	})
}

// TestMetricsFieldsCoverTheStruct: the field table names every whole-number
// field of MetricsLine once, in struct order, under its JSON name, and no two
// fields share a Prometheus series.
func TestMetricsFieldsCoverTheStruct(t *testing.T) {
	rt := reflect.TypeOf(MetricsLine{})
	var want []string
	for i := range rt.NumField() {
		f := rt.Field(i)
		if f.Type.Kind() == reflect.Uint64 || f.Name == "ProcessRSSBytes" {
			want = append(want, strings.Split(f.Tag.Get("json"), ",")[0])
		}
	}
	var got []string
	series := map[string]bool{}
	for _, f := range MetricsFields() {
		got = append(got, f.Name)
		key := f.PromName + "/" + f.PromLabel[0] + "=" + f.PromLabel[1]
		if series[key] || f.PromName == "" || f.Help == "" {
			t.Errorf("field %s: Prometheus series %q repeated or unnamed, or no help", f.Name, key)
		}
		series[key] = true
	}
	if !slices.Equal(got, want) {
		t.Errorf("table %v\nstruct %v", got, want)
	}
	if n := len(MetricsFields()) - len(AppendedMetricsFields()); n+2 != upstreamMetricsCount {
		t.Errorf("%d upstream fields in the table, want %d", n+2, upstreamMetricsCount)
	}
}

func TestSumMetricsLines(t *testing.T) {
	a, b := sampleMetricsLine(), sampleMetricsLine()
	b.ProcessRSSBytes = nil
	s := SumMetricsLines(a, b)
	if s.AcceptedConnections != 2 || s.RateLimitedResponses != 32 || s.ClosedShutdown != 50 || *s.ProcessRSSBytes != 13 || s.Absent != nil {
		t.Errorf("sum %+v", s)
	}
	s = SumMetricsLines(a, olderSample())
	if s.EstablishedTotal != 28 || s.ClosedByPeer != 17 || !slices.Equal(s.Absent, AppendedMetricsFields()[3:]) {
		t.Errorf("sum with an older line %+v", s)
	}
	if SumMetricsLines().ProcessRSSBytes != nil {
		t.Error("empty sum has an RSS")
	}
}

// Processes of one server read the same host: its TCP counters are not added up.
func TestSumMetricsLinesHostCounters(t *testing.T) {
	a, b := sampleMetricsLine(), sampleMetricsLine()
	b.HostTCPRetransSegs = a.HostTCPRetransSegs + 7
	s := SumMetricsLines(a, b)
	if s.HostTCPRetransSegs != b.HostTCPRetransSegs || s.HostTCPListenOverflows != a.HostTCPListenOverflows || s.AcceptedConnections != 2*a.AcceptedConnections {
		t.Errorf("host counters of one host summed: %+v", s)
	}
	for _, name := range HostTCPFields {
		f, ok := LookupMetricsField(name)
		if !ok || !f.Host || !f.Appended || f.Kind != MetricCounter {
			t.Errorf("%s: %+v %v", name, f, ok)
		}
	}
	after := a
	after.HostTCPRetransSegs += 5
	after.HostTCPListenDrops = 0 // a restarted server: its counters start again
	if g, ok := after.HostTCPGrowth(a); !ok || g != [len(HostTCPFields)]uint64{0, 0, 5, 0, 0} {
		t.Errorf("growth %v %v", g, ok)
	}
	if _, ok := a.HostTCPGrowth(preHostSample()); ok {
		t.Error("growth from a reading without the host counters")
	}
	s = SumMetricsLines(a, preHostSample())
	if !slices.Equal(s.Absent, HostTCPFields[:]) || s.Has("host_tcp_retrans_segs") {
		t.Errorf("a reading without the host counters leaves them out of the sum: absent %v", s.Absent)
	}
}

func TestHasAndAccounting(t *testing.T) {
	up := upstreamSample()
	if up.Has("established_total") || !up.Has("frames_processed") || !up.Has("process_rss_bytes") || up.Has("label") {
		t.Error("Has on an upstream line")
	}
	if _, ok := up.HandshakesCompleted(); ok {
		t.Error("an upstream line has no cumulative handshake count")
	}
	m := sampleMetricsLine()
	if n, ok := m.HandshakesCompleted(); !ok || n != 14 {
		t.Errorf("HandshakesCompleted %d %v", n, ok)
	}
	if m.Closed() != 17+18+19+20+21+22+23+24+25 {
		t.Errorf("Closed %d", m.Closed())
	}
	if p := m.Pending(); p != 1-(14+6+5+7+8+9+10) {
		t.Errorf("Pending %d", p)
	}
}

// sourceLineFields are the per-prefix fields of prefix "held" with counters 1, 2, …, 19 and of
// "ddos-1" with 100, 101, …, 118, as the server appends them after closed_shutdown.
func sourceLineFields() string {
	var b strings.Builder
	for _, p := range []struct {
		name string
		base uint64
	}{{"held", 1}, {"ddos-1", 100}} {
		for i, f := range SourceFields() {
			b.WriteString(`,"` + SourceFieldName(p.name, f.Name) + `":` + strconv.FormatUint(p.base+uint64(i), 10))
		}
	}
	return b.String()
}

func sourceSample() MetricsLine {
	m := sampleMetricsLine()
	for _, p := range []struct {
		name string
		base uint64
	}{{"held", 1}, {"ddos-1", 100}} {
		for i, f := range SourceFields() {
			if !m.SetSourceCounter(p.name, f.Name, p.base+uint64(i)) {
				panic(f.Name)
			}
		}
	}
	return m
}

// The per-prefix counters come after every other field, so a line with them is the line without
// them plus a tail: every parser of the older lines (the seed's upstream-shaped one included)
// reads it, and this one parses it back exactly.
func TestSourceCountersLine(t *testing.T) {
	m := sourceSample()
	got := FormatMetricsLine(m)
	want := strings.TrimSuffix(ourMetricsLine, "}") + sourceLineFields() + "}"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if !strings.HasPrefix(got, strings.TrimSuffix(ourMetricsLine, "}")+`,"source_held_accepted":1,"source_held_admitted":2,`) {
		t.Errorf("prefix fields not appended after closed_shutdown: %s", got)
	}
	back, err := ParseMetricsLine(got)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, m) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", back, m)
	}
	held := back.Source("held")
	if held == nil || held.Accepted != 1 || held.Admitted != 2 || held.ShedHandshakePerSource != 4 || held.Established != 9 ||
		held.ClosedShutdown != 18 || held.RateLimitedResponses != 19 || held.Shed() != 3+4+5+6 || back.Source("nope") != nil {
		t.Fatalf("held %+v", held)
	}
	if c := held.Counters(); len(c) != len(SourceFields()) || c["handshake_timeouts"] != 8 {
		t.Errorf("Counters %v", c)
	}
	if !slices.Equal(back.SourceNames(), []string{"held", "ddos-1"}) {
		t.Errorf("names %v", back.SourceNames())
	}
	// Without the prefix fields, the line is the line of a server with no prefix configured.
	plain := m
	plain.Sources = nil
	if FormatMetricsLine(plain) != ourMetricsLine {
		t.Errorf("no prefixes: %s", FormatMetricsLine(plain))
	}
	// A counter of a prefix the line does not give is 0; unknown counters and invalid names stay
	// extra fields; null counts as not given.
	odd := strings.TrimSuffix(ourMetricsLine, "}") + `,"source_x_accepted":3,"source_x_bogus":4,"source_Bad_accepted":5,"source_y_admitted":null}`
	o, err := ParseMetricsLine(odd)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Sources) != 1 || o.Sources[0] != (SourceCounters{Name: "x", Accepted: 3}) ||
		!reflect.DeepEqual(o.Extra, map[string]float64{"source_x_bogus": 4, "source_Bad_accepted": 5}) {
		t.Errorf("odd line: sources %+v extra %v", o.Sources, o.Extra)
	}
	// An extra key that names a prefix counter is never written (it would repeat one).
	dup := m
	dup.Extra = map[string]float64{"source_held_accepted": 7, "other": 1}
	if FormatMetricsLine(dup) != strings.TrimSuffix(got, "}")+`,"other":1}` {
		t.Errorf("extra shadowing a prefix counter: %s", FormatMetricsLine(dup))
	}
}

func TestSourceCountersRejects(t *testing.T) {
	base := strings.TrimSuffix(ourMetricsLine, "}")
	for _, tc := range []struct{ name, tail, want string }{
		{"negative", `,"source_held_accepted":-1}`, "source_held_accepted is -1: must be a whole number"},
		{"fraction", `,"source_held_accepted":1.5}`, "source_held_accepted is 1.5"},
		{"string", `,"source_held_accepted":"1"}`, `source_held_accepted is "1"`},
		{"duplicate", `,"source_held_accepted":1,"source_held_accepted":1}`, `field "source_held_accepted" appears twice`},
	} {
		if _, err := ParseMetricsLine(base + tc.tail); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
	before := strings.Replace(ourMetricsLine, `"frames_processed":11,`, `"source_held_accepted":1,"frames_processed":11,`, 1)
	if _, err := ParseMetricsLine(before); err == nil || !strings.Contains(err.Error(), "upstream fields must come first") {
		t.Errorf("prefix field among the upstream ones: %v", err)
	}
}

// A field name splits into prefix and counter one way only: no counter's name is another's tail
// after an underscore, and every series is distinct.
func TestSourceFieldNamesSplitOneWay(t *testing.T) {
	series := map[string]bool{}
	for _, a := range SourceFields() {
		for _, b := range SourceFields() {
			if a.Name != b.Name && strings.HasSuffix(a.Name, "_"+b.Name) {
				t.Errorf("counter %s ends in _%s", a.Name, b.Name)
			}
		}
		key := a.PromName + "/" + a.PromLabel[0] + "=" + a.PromLabel[1]
		if series[key] || a.Help == "" || !strings.HasPrefix(a.PromName, "source_") {
			t.Errorf("counter %s: series %q repeated, unnamed or without help", a.Name, key)
		}
		series[key] = true
		if f, ok := LookupSourceProm(a.PromName, a.PromLabel[0], a.PromLabel[1]); !ok || f.Name != a.Name {
			t.Errorf("LookupSourceProm(%s) = %v %v", key, f.Name, ok)
		}
		// A counter named like a global field counts what that field counts.
		if g, ok := LookupMetricsField(a.Name); ok && (g.Kind != MetricCounter || g.PromName != strings.TrimPrefix(a.PromName, "source_") || g.PromLabel != a.PromLabel) {
			t.Errorf("%s differs from the global field of its name", a.Name)
		}
		for _, prefix := range []string{"a", "held", "ddos-1", "x_shed", "a_b_c", strings.Repeat("z", 32)} {
			p, f, ok := SplitSourceFieldName(SourceFieldName(prefix, a.Name))
			if !ok || p != prefix || f.Name != a.Name {
				t.Errorf("split %s = %q %q %v", SourceFieldName(prefix, a.Name), p, f.Name, ok)
			}
		}
	}
	rt := reflect.TypeOf(SourceCounters{})
	var want []string
	for i := range rt.NumField() {
		if f := rt.Field(i); f.Type.Kind() == reflect.Uint64 {
			want = append(want, f.Tag.Get("json"))
		}
	}
	var got []string
	for _, f := range SourceFields() {
		got = append(got, f.Name)
	}
	if !slices.Equal(got, want) {
		t.Errorf("table %v\nstruct %v", got, want)
	}
	for _, bad := range []string{"", "_a", "-a", "A", "a.b", "a b", strings.Repeat("z", 33), "é"} {
		if ValidSourcePrefixName(bad) {
			t.Errorf("%q taken as a prefix name", bad)
		}
	}
	for _, key := range []string{"source__accepted", "source_accepted", "source_x_", "sourcex_accepted", "accepted"} {
		if p, f, ok := SplitSourceFieldName(key); ok {
			t.Errorf("%s split as %q %q", key, p, f.Name)
		}
	}
}

// The --processes parent sums prefix by prefix; a prefix only one process reports is kept.
func TestSumMetricsLinesSources(t *testing.T) {
	a, b := sourceSample(), sourceSample()
	b.Sources = append(b.Sources, SourceCounters{Name: "late", Accepted: 5})
	s := SumMetricsLines(a, b, sampleMetricsLine())
	if !slices.Equal(s.SourceNames(), []string{"held", "ddos-1", "late"}) {
		t.Fatalf("names %v", s.SourceNames())
	}
	for i, f := range SourceFields() {
		if v := f.Value(s.Source("held")); v != 2*uint64(1+i) {
			t.Errorf("held %s = %d, want %d", f.Name, v, 2*(1+i))
		}
	}
	if s.Source("late").Accepted != 5 || s.Source("ddos-1").RateLimitedResponses != 2*118 {
		t.Errorf("sum %+v", s.Sources)
	}
	if a.Source("held").Accepted != 1 {
		t.Error("the sum changed its input")
	}
	if WithoutAppended(a).Sources != nil {
		t.Error("WithoutAppended kept the prefixes")
	}
}
