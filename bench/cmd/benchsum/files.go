package main

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/loadproof/loadproof/internal/boundedfile"
	"github.com/loadproof/loadproof/internal/keycastresult"
	"github.com/loadproof/loadproof/internal/linkkeys"
	"github.com/loadproof/loadproof/internal/linkkeysload"
	"github.com/loadproof/loadproof/internal/linkkeysresult"
	"github.com/loadproof/loadproof/internal/machine"
	"github.com/loadproof/loadproof/internal/report"
	"github.com/loadproof/loadproof/internal/search"
)

// intArg parses a count argument (a round count, a number of sources).
func intArg(name, s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: %s %q is not a count (0, 1, 2 ...)", errUsage, name, s)
	}
	return n, nil
}

// floatArg parses a figure argument.
func floatArg(name, s string) (float64, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %s %q is not a number", errUsage, name, s)
	}
	return f, nil
}

// median is the middle value (the mean of the two middle ones for an even count); NaN for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// ratio is b/a, NaN where a is zero: a ratio the data cannot give shows as nan, not a crash.
func ratio(b, a float64) float64 {
	if a == 0 {
		return math.NaN()
	}
	return b / a
}

// num prints a number the way the summaries always have: nan for NaN, else fmt's verb.
func num(verb string, x float64) string {
	if math.IsNaN(x) {
		return "nan"
	}
	return fmt.Sprintf(verb, x)
}

// raw prints a JSON value as the scripts' summaries did: null as None, true/false as True/False,
// numbers as written in the file, strings bare.
func raw(v json.RawMessage) string {
	s := strings.TrimSpace(string(v))
	switch s {
	case "", "null":
		return "None"
	case "true":
		return "True"
	case "false":
		return "False"
	}
	if strings.HasPrefix(s, `"`) {
		var str string
		if json.Unmarshal(v, &str) == nil {
			return str
		}
	}
	if strings.HasPrefix(s, "[") || strings.HasPrefix(s, "{") {
		d := json.NewDecoder(strings.NewReader(s))
		d.UseNumber()
		var x any
		if d.Decode(&x) == nil {
			return repr(x)
		}
	}
	return s
}

// repr writes a decoded JSON list or object as the summaries always printed one: ['a', 1, None],
// {'k': 2}, keys in sorted order.
func repr(x any) string {
	switch v := x.(type) {
	case nil:
		return "None"
	case bool:
		return pyBool(v)
	case string:
		return "'" + strings.ReplaceAll(strings.ReplaceAll(v, `\`, `\\`), "'", `\'`) + "'"
	case json.Number:
		return v.String()
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = repr(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = repr(k) + ": " + repr(v[k])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return fmt.Sprint(x)
}

// pyBool prints a bool as the summaries always have.
func pyBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

// The files loadproof writes are read through the package that owns each format, never through
// partial structs of our own (they would drift from the real model silently): result files,
// search files and the rest through report.Open (openResult, openSearch), METRICS logs through
// linkkeysload.ReadMetricsLog, comparisons through compare.Parse, coordination manifests through
// coord.ReadManifest. What loadproof does not write (perf script output, /proc files, go test
// -bench output, gctrace lines, the scripts' own text files) is parsed here, where it is read.

// openFile reads path through report.Open and takes the model pick returns; nil there means the
// file is of another kind (want says which it should be).
func openFile[T any](path, want string, pick func(*report.File) *T) (*T, error) {
	f, err := report.Open(path)
	if err != nil {
		return nil, err
	}
	if v := pick(f); v != nil {
		return v, nil
	}
	return nil, fmt.Errorf("%s is a %s, not %s; give the file the bench script wrote there", path, f.Kind, want)
}

// openResult reads a LinkKeys client result file.
func openResult(path string) (*linkkeysresult.Result, error) {
	return openFile(path, "a LinkKeys client result", func(f *report.File) *linkkeysresult.Result { return f.LinkKeys })
}

// openKeycast reads a Keycast results file.
func openKeycast(path string) (*keycastresult.Results, error) {
	return openFile(path, "a Keycast results file", func(f *report.File) *keycastresult.Results { return f.Keycast })
}

// openSearch reads a `loadproof search` file.
func openSearch(path string) (*search.Result, error) {
	return openFile(path, "a search file", func(f *report.File) *search.Result { return f.Search })
}

// readMetricsLog reads the METRICS lines of a LinkKeys server log.
func readMetricsLog(path string) ([]linkkeys.MetricsLine, error) {
	f, err := boundedfile.Open(path, boundedfile.MetricsLog)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ms, err := linkkeysload.ReadMetricsLog(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ms, nil
}

// firstMachine is the machine record of a result: the first of its envelope's records.
func firstMachine(path string, r *linkkeysresult.Result) (machine.Record, error) {
	if len(r.Machines) == 0 {
		return machine.Record{}, fmt.Errorf("%s: no machine record", path)
	}
	return r.Machines[0], nil
}

// resultMachine reads the machine record of the result file at path.
func resultMachine(path string) (machine.Record, error) {
	r, err := openResult(path)
	if err != nil {
		return machine.Record{}, err
	}
	return firstMachine(path, r)
}

const gib = 1 << 30

// cpuUsPerOp is a CPU time in µs per operation (at least one).
func cpuUsPerOp[N int64 | float64](d linkkeysresult.Duration, ops N) float64 {
	return float64(d) / 1e3 / max(float64(ops), 1)
}

// show prints a value of a model as the summaries printed the same value read from its file
// (raw): loadproof wrote the file with encoding/json from the same types, so the value encodes
// to the text the file holds.
func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return raw(b)
}

// accounting is the verdict the summaries print of a result's server accounting: "exact" when it
// has checks and every one holds, else MISMATCH and the checks (or the note when there are none).
func accounting(s *linkkeysresult.ServerAccounting) string {
	switch {
	case s == nil:
		return "MISMATCH None"
	case len(s.Checks) > 0 && !s.Mismatch():
		return "exact"
	case len(s.Checks) > 0:
		return "MISMATCH " + show(s.Checks)
	case s.Note == "":
		return "MISMATCH None"
	}
	return "MISMATCH " + s.Note
}

func join(dir, name string) string { return filepath.Join(dir, name) }

func sortFloats(s []float64) { sort.Float64s(s) }
