package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/loadproof/loadproof/internal/machine"
)

// readJSON decodes the JSON file at path into v; the error names the file.
func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

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

// envelopeMachine is the machine record of a result file: the envelope's first record, or the
// single record of files written before the envelope.
type envelopeMachine struct {
	Machines []machine.Record `json:"machines"`
	Machine  *machine.Record  `json:"machine"`
}

func (e envelopeMachine) first() (machine.Record, error) {
	if len(e.Machines) > 0 {
		return e.Machines[0], nil
	}
	if e.Machine != nil {
		return *e.Machine, nil
	}
	return machine.Record{}, fmt.Errorf("no machine record")
}

// resultMachine reads the machine record of the result file at path.
func resultMachine(path string) (machine.Record, error) {
	var e envelopeMachine
	if err := readJSON(path, &e); err != nil {
		return machine.Record{}, err
	}
	m, err := e.first()
	if err != nil {
		return m, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

const gib = 1 << 30

// cpuNs is a CPU time section of a result file (client_cpu, server_cpu).
type cpuNs struct {
	Ns float64 `json:"ns"`
}

// check is one accounting check of a result's server section.
type check struct {
	OK bool `json:"ok"`
}

// serverChecks is a LinkKeys result's server section: its accounting checks, or why there are none.
type serverChecks struct {
	Checks []json.RawMessage `json:"checks"`
	Note   json.RawMessage   `json:"note"`
}

// exact reports whether there are checks and every one holds; else the text the summaries print
// after MISMATCH (the checks, or the note when there are none).
func (s *serverChecks) exact() (bool, string) {
	if s == nil {
		return false, "None"
	}
	ok := len(s.Checks) > 0
	for _, c := range s.Checks {
		var k check
		if json.Unmarshal(c, &k) != nil || !k.OK {
			ok = false
		}
	}
	if ok {
		return true, ""
	}
	if len(s.Checks) > 0 {
		parts := make([]string, len(s.Checks))
		for i, c := range s.Checks {
			parts[i] = string(c)
		}
		return false, raw(json.RawMessage("[" + strings.Join(parts, ",") + "]"))
	}
	return false, raw(s.Note)
}

// metricsLines reads the METRICS lines of a LinkKeys server log, each decoded into a T.
func metricsLines[T any](path string) ([]T, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []T
	for i, l := range strings.Split(string(b), "\n") {
		rest, ok := strings.CutPrefix(l, "METRICS ")
		if !ok {
			continue
		}
		var v T
		if err := json.Unmarshal([]byte(rest), &v); err != nil {
			return nil, fmt.Errorf("%s:%d: METRICS line: %w", path, i+1, err)
		}
		out = append(out, v)
	}
	return out, nil
}

func join(dir, name string) string { return filepath.Join(dir, name) }

func sortFloats(s []float64) { sort.Float64s(s) }
