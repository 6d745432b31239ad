package linkkeys

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/loadproof/loadproof/internal/textclip"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Reading METRICS lines from outside: strict, bounded, every problem named.

// ParseMetricsLine parses one METRICS line as printed by the loadproof
// server or by the upstream Rust load-test server; trailing newlines are
// allowed. The line must be [MetricsPrefix] and one JSON object, at most
// [MaxMetricsLineBytes] long, in which:
//
//   - the 15 fields of the upstream line are all present, in their order,
//     before any other field;
//   - label is "running" or "final", elapsed_secs a finite number of seconds
//     (0 or more), every counter and gauge a whole number that fits in 64
//     bits and process_rss_bytes such a number or null;
//   - the appended fields of [MetricsFields], when present, are whole
//     numbers (null counts as absent), in any order after the upstream ones;
//   - the per-prefix fields source_<name>_<counter> (a valid prefix name and
//     a counter of [SourceFields]) are whole numbers or null, in any order
//     after the upstream ones;
//   - no field appears twice.
//
// Appended fields the line lacks are listed in Absent. The per-prefix fields
// go to Sources, prefix by prefix in the order the prefixes first appear (a
// counter of a prefix the line does not give is 0). Other fields are kept
// in Extra when they are finite numbers and skipped otherwise. A line without
// the prefix gives an error wrapping [ErrNotMetricsLine]; every other error
// names the problem.
func ParseMetricsLine(line string) (MetricsLine, error) {
	line = trimEOL(line)
	if len(line) > MaxMetricsLineBytes {
		return MetricsLine{}, metricsErrorf("%d bytes is longer than the %d a METRICS line may be; is this a server's METRICS line?", len(line), MaxMetricsLineBytes)
	}
	body, ok := strings.CutPrefix(line, MetricsPrefix)
	if !ok {
		return MetricsLine{}, fmt.Errorf("%w: %q does not start with %q", ErrNotMetricsLine, textclip.String(line, 40), MetricsPrefix)
	}
	dec := json.NewDecoder(strings.NewReader(body))
	tok, err := dec.Token()
	if err != nil {
		return MetricsLine{}, invalidJSON(err)
	}
	if tok != json.Delim('{') {
		return MetricsLine{}, metricsErrorf("invalid JSON object: the line holds %s after the prefix, want an object", describeToken(tok))
	}
	var (
		m       MetricsLine
		seen    [2 + len(metricsFields)]bool
		present [2 + len(metricsFields)]bool // seen with a non-null value
		others  map[string]bool              // fields outside the named ones, seen so far
		maxRank = -1                         // highest order rank so far
		maxName string
	)
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return MetricsLine{}, invalidJSON(err)
		}
		key, _ := kt.(string)
		idx, named := metricsFieldIndex[key]
		if named {
			if seen[idx] {
				return MetricsLine{}, metricsErrorf("field %q appears twice", key)
			}
			seen[idx] = true
		} else {
			if others[key] {
				return MetricsLine{}, metricsErrorf("field %q appears twice", textclip.String(key, 40))
			}
			if others == nil {
				others = map[string]bool{}
			}
			others[key] = true
		}
		// The upstream fields rank by position; every other field ranks
		// after them, in any order among themselves.
		rank := upstreamMetricsCount
		if named && idx < rank {
			rank = idx
		}
		if rank < maxRank {
			return MetricsLine{}, metricsErrorf("field %q comes after %q: the 15 upstream fields must come first, in their order", textclip.String(key, 40), textclip.String(maxName, 40))
		}
		maxRank, maxName = rank, key
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return MetricsLine{}, metricsErrorf("invalid JSON object: value of %q: %v", textclip.String(key, 40), err)
		}
		set, err := m.set(key, idx, named, raw)
		if err != nil {
			return MetricsLine{}, err
		}
		if named {
			present[idx] = set
		}
	}
	if _, err := dec.Token(); err != nil {
		return MetricsLine{}, invalidJSON(err)
	}
	if rest := strings.Trim(body[dec.InputOffset():], " \t\r\n"); rest != "" {
		return MetricsLine{}, metricsErrorf("%d unexpected bytes after the JSON object", len(rest))
	}
	var missing []string
	for name, i := range metricsFieldIndex {
		if i < upstreamMetricsCount && !seen[i] {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		sort.Slice(missing, func(a, b int) bool { return metricsFieldIndex[missing[a]] < metricsFieldIndex[missing[b]] })
		return MetricsLine{}, metricsErrorf("missing required fields %v", missing)
	}
	for i, f := range metricsFields {
		if f.Appended && !present[2+i] {
			m.Absent = append(m.Absent, f.Name)
		}
	}
	return m, nil
}

// set stores the value of one field and reports whether it held a value
// (not null).
func (m *MetricsLine) set(key string, idx int, named bool, raw json.RawMessage) (bool, error) {
	text := string(raw)
	if !named {
		if prefix, f, ok := SplitSourceFieldName(key); ok {
			if text == "null" {
				return false, nil
			}
			v, err := strconv.ParseUint(text, 10, 64)
			if err != nil {
				return false, metricsErrorf("%s is %s: must be a whole number from 0 to 2^64-1", key, textclip.String(text, 40))
			}
			*f.ptr(m.sourceOrAdd(prefix)) = v
			return true, nil
		}
		if isJSONNumber(text) {
			if f, err := strconv.ParseFloat(text, 64); err == nil {
				if m.Extra == nil {
					m.Extra = map[string]float64{}
				}
				m.Extra[key] = f
			}
		}
		return false, nil
	}
	switch idx {
	case 0:
		var s string
		if text[0] != '"' || json.Unmarshal(raw, &s) != nil {
			return false, metricsErrorf("label is %s: must be \"running\" or \"final\"", textclip.String(text, 40))
		}
		if s != "running" && s != "final" {
			return false, metricsErrorf("label is %q: must be \"running\" or \"final\"", textclip.String(s, 40))
		}
		m.Label = s
		return true, nil
	case 1:
		f, err := strconv.ParseFloat(text, 64)
		if !isJSONNumber(text) || err != nil || f < 0 || math.IsInf(f, 0) {
			return false, metricsErrorf("elapsed_secs is %s: must be a finite number of seconds, 0 or more", textclip.String(text, 40))
		}
		m.ElapsedSecs = f
		return true, nil
	}
	f := metricsFields[idx-2]
	if text == "null" && (f.ptr == nil || f.Appended) {
		return false, nil
	}
	v, err := strconv.ParseUint(text, 10, 64)
	if err != nil {
		if f.ptr == nil {
			return false, metricsErrorf("%s is %s: must be a whole number of bytes or null", key, textclip.String(text, 40))
		}
		return false, metricsErrorf("%s is %s: must be a whole number from 0 to 2^64-1", key, textclip.String(text, 40))
	}
	if f.ptr == nil {
		m.ProcessRSSBytes = &v
	} else {
		*f.ptr(m) = v
	}
	return true, nil
}

// isJSONNumber reports whether a valid JSON value is a number.
func isJSONNumber(v string) bool {
	return v != "" && (v[0] == '-' || v[0] >= '0' && v[0] <= '9')
}

func describeToken(t json.Token) string {
	switch t {
	case json.Delim('['):
		return "an array"
	case nil:
		return "null"
	}
	switch t.(type) {
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	}
	return fmt.Sprint(t)
}

func invalidJSON(err error) error {
	if errors.Is(err, io.EOF) {
		return metricsErrorf("invalid JSON object: the line ends before the object is closed")
	}
	return metricsErrorf("invalid JSON object: %v", err)
}

func metricsErrorf(format string, args ...any) error {
	return fmt.Errorf("linkkeys: METRICS line: "+format, args...)
}

func trimEOL(s string) string {
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == '\r') {
		s = s[:len(s)-1]
	}
	return s
}
