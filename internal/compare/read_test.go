package compare

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// A comparison written as JSON reads back as the same model, its null figures as NaN.
func TestParseReadsWhatCompareWrites(t *testing.T) {
	c, err := Compare(runs(1, 3, 1000, time.Millisecond), runs(2, 3, 1000, time.Millisecond), Options{Iterations: 200, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	c.Metrics = append(c.Metrics, Metric{Name: "p99:none", A: math.NaN(), B: 1, Change: math.NaN(), Low: math.NaN(), High: math.NaN(), Verdict: NoChange, Unit: "ms"})
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "cmp.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	last := got.Metrics[len(got.Metrics)-1]
	if !math.IsNaN(last.A) || last.B != 1 || !math.IsNaN(last.Change) || !math.IsNaN(last.Low) || !math.IsNaN(last.High) {
		t.Errorf("null figures read as %+v, want NaN (and b 1)", last)
	}
	again, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(b) {
		t.Errorf("read back and written again, the comparison differs:\n%s\nwant:\n%s", again, b)
	}
	if !reflect.DeepEqual(got.Metrics[0], c.Metrics[0]) {
		t.Errorf("first metric %+v, want %+v", got.Metrics[0], c.Metrics[0])
	}
}

// What is no comparison is refused with a message naming the problem.
func TestParseRefusesWhatIsNoComparison(t *testing.T) {
	for _, tc := range []struct{ in, msg string }{
		{``, "not a JSON object"},
		{`[1]`, "not a JSON object"},
		{`{"runs_a":1,"runs_b":1,"metrics":[{"name":"x","verdict":"no change"}]`, "unexpected end"},
		{`{"runs_a":0,"runs_b":1,"metrics":[{"name":"x","verdict":"no change"}]}`, "at least one run a side"},
		{`{"runs_a":1,"runs_b":1,"metrics":[]}`, "no metrics"},
		{`{"runs_a":1,"runs_b":1,"metrics":[{"verdict":"better"}]}`, "metric 0 has no name"},
		{`{"runs_a":1,"runs_b":1,"metrics":[{"name":"throughput","verdict":"meh"}]}`, `verdict "meh"`},
		{`{"runs_a":1,"runs_b":1,"metrics":[{"name":"throughput","verdict":"better","a":"x"}]}`, "cannot unmarshal"},
	} {
		if _, err := Parse([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("Parse(%q): %v, want an error with %q", tc.in, err, tc.msg)
		}
	}
}

// FuzzParse: any bytes are read or refused with a message, never a panic; what is read writes
// and reads back the same.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"runs_a":2,"runs_b":2,"confidence":0.95,"iterations":2000,"metrics":[{"name":"throughput","higher_is_better":true,"verdict":"no change","unit":"/s","a":1,"b":null,"change_pct":null,"low_pct":-1,"high_pct":2}]}`))
	f.Add([]byte(`{"runs_a":1,"runs_b":1,"metrics":[{"name":"p99:latency","verdict":"worse"}],"notes":["one run a side"]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse(b)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an error without a message")
			}
			return
		}
		out, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("a comparison read does not write: %v", err)
		}
		again, err := Parse(out)
		if err != nil {
			t.Fatalf("a comparison written does not read back: %v\n%s", err, out)
		}
		out2, _ := json.Marshal(again)
		if string(out2) != string(out) {
			t.Fatalf("written twice, it differs:\n%s\n%s", out, out2)
		}
	})
}
