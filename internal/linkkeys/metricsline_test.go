package linkkeys

import (
	"errors"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// upstreamMetricsLine is a line in the upstream Rust load-test server's
// documented shape, written by hand: the 15 fields of
// docs/protocol-linkkeys.md, METRICS line, and nothing after them.
const upstreamMetricsLine = `METRICS {"label":"running","elapsed_secs":5.001,"accepted_connections":12017,"open_connections":3,"established_connections":2,"handshakes_in_progress":1,"handshake_timeouts":0,"handshake_rejections":23,"shed_connection_limit":0,"shed_handshake_per_source":0,"shed_handshake_overflow":1955,"shed_handshake_global":8963,"frames_processed":7,"frame_buffer_bytes":0,"process_rss_bytes":28311552}`

// ourMetricsLine is a line as the loadproof server prints it, with the three
// appended fields.
const ourMetricsLine = `METRICS {"label":"running","elapsed_secs":5.001234567,"accepted_connections":1,"open_connections":2,"established_connections":3,"handshakes_in_progress":4,"handshake_timeouts":5,"handshake_rejections":6,"shed_connection_limit":7,"shed_handshake_per_source":8,"shed_handshake_overflow":9,"shed_handshake_global":10,"frames_processed":11,"frame_buffer_bytes":12,"process_rss_bytes":13,"established_total":14,"parked_connections":15,"rate_limited_responses":16}`

func sampleMetricsLine() MetricsLine {
	return MetricsLine{
		Label: "running", ElapsedSecs: 5.001234567, AcceptedConnections: 1, OpenConnections: 2, EstablishedConnections: 3,
		HandshakesInProgress: 4, HandshakeTimeouts: 5, HandshakeRejections: 6, ShedConnectionLimit: 7,
		ShedHandshakePerSource: 8, ShedHandshakeOverflow: 9, ShedHandshakeGlobal: 10, FramesProcessed: 11,
		FrameBufferBytes: 12, ProcessRSSBytes: ptr[uint64](13), EstablishedTotal: ptr[uint64](14),
		ParkedConnections: ptr[uint64](15), RateLimitedResponses: ptr[uint64](16),
	}
}

func TestAppendMetricsLine(t *testing.T) {
	full := sampleMetricsLine()
	upstream := MetricsLine{
		Label: "running", ElapsedSecs: 5.001, AcceptedConnections: 12017, OpenConnections: 3, EstablishedConnections: 2,
		HandshakesInProgress: 1, HandshakeRejections: 23, ShedHandshakeOverflow: 1955, ShedHandshakeGlobal: 8963,
		FramesProcessed: 7, ProcessRSSBytes: ptr[uint64](28311552),
	}
	nullRSS := full
	nullRSS.Label, nullRSS.ElapsedSecs, nullRSS.ProcessRSSBytes = "final", 0, nil
	extra := full
	extra.Extra = map[string]float64{"zeta": 2, "alpha": 0.5, "accepted_connections": 99, "big": 1e21, "bad": math.NaN()}
	partial := upstream
	partial.ParkedConnections = ptr[uint64](0)
	for _, tc := range []struct {
		name string
		m    MetricsLine
		want string
	}{
		{"ours", full, ourMetricsLine},
		{"upstream", upstream, upstreamMetricsLine},
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
		{"upstream", upstreamMetricsLine, MetricsLine{
			Label: "running", ElapsedSecs: 5.001, AcceptedConnections: 12017, OpenConnections: 3, EstablishedConnections: 2,
			HandshakesInProgress: 1, HandshakeRejections: 23, ShedHandshakeOverflow: 1955, ShedHandshakeGlobal: 8963,
			FramesProcessed: 7, ProcessRSSBytes: ptr[uint64](28311552),
		}},
		{"null rss, appended null, extras", strings.Replace(upstreamMetricsLine, `"process_rss_bytes":28311552}`,
			`"process_rss_bytes":null,"note":"x","rate_limited_responses":4,"established_total":null,"admitted":10000,"nested":{"a":1},"huge":1e400}`, 1),
			MetricsLine{
				Label: "running", ElapsedSecs: 5.001, AcceptedConnections: 12017, OpenConnections: 3, EstablishedConnections: 2,
				HandshakesInProgress: 1, HandshakeRejections: 23, ShedHandshakeOverflow: 1955, ShedHandshakeGlobal: 8963,
				FramesProcessed: 7, RateLimitedResponses: ptr[uint64](4), Extra: map[string]float64{"admitted": 10000},
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
	for i, name := range append(upstreamMetricsFields[2:], appendedMetricsFields[:]...) {
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
	want := `"accepted_connections":100,"open_connections":101,"established_connections":102,"handshakes_in_progress":103,"handshake_timeouts":104,"handshake_rejections":105,"shed_connection_limit":106,"shed_handshake_per_source":107,"shed_handshake_overflow":108,"shed_handshake_global":109,"frames_processed":110,"frame_buffer_bytes":111,"process_rss_bytes":112,"established_total":113,"parked_connections":114,"rate_limited_responses":115}`
	if got := string(AppendMetricsLine(nil, m)); !strings.HasSuffix(got, want) {
		t.Errorf("got %s", got)
	}
}

func FuzzParseMetricsLine(f *testing.F) {
	f.Add(ourMetricsLine)
	f.Add(upstreamMetricsLine + "\n")
	f.Add(strings.Replace(upstreamMetricsLine, `28311552}`, `null,"established_total":5,"note":"x","admitted":1.5e3}`, 1))
	f.Add(`METRICS {"label":"final","elapsed_secs":1e-5,"accepted_connections":0,"open_connections":0,"established_connections":0,"handshakes_in_progress":0,"handshake_timeouts":0,"handshake_rejections":0,"shed_connection_limit":0,"shed_handshake_per_source":0,"shed_handshake_overflow":0,"shed_handshake_global":0,"frames_processed":0,"frame_buffer_bytes":0,"process_rss_bytes":null}`)
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
