package keycastresult

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// ErrNotResults is wrapped by every error saying a file is not a results file at all (as opposed to
// a results file whose counts disagree).
var ErrNotResults = errors.New("not a Keycast results file")

// NotResultsError says what a file that is not a results file appears to be, so the reader can
// find the right one.
type NotResultsError struct {
	// Path names the file in the message; empty means "the file".
	Path string
	// What describes it, as a predicate ("is a users file written by setup …").
	What string
	// Unknown says the file is a JSON object of no kind the tools write.
	Unknown bool
}

func (e *NotResultsError) Error() string {
	if e.Path == "" {
		return "the file " + e.What
	}
	return e.Path + " " + e.What
}

// Is makes errors.Is(err, ErrNotResults) hold.
func (e *NotResultsError) Is(target error) bool { return target == ErrNotResults }

// requiredMetadata and requiredSummary are the fields every version of upstream's tool writes, and
// so does ours (docs/reliability.md lists them). A file without them was not written by `run`,
// whatever else it holds: serde would refuse it too.
var (
	requiredMetadata = []string{"url", "scenario", "method", "concurrency", "duration_secs", "user_count", "timestamp"}
	requiredSummary  = []string{
		"duration_secs", "requests_per_second", "total_requests", "successful_requests", "failed_requests",
		"latency_min_ms", "latency_p50_ms", "latency_p95_ms", "latency_p99_ms", "latency_max_ms",
		"cache_hit_ratio", "error_rate", "errors_auth", "errors_server", "errors_client", "errors_network",
	}
)

// CheckShape tells a results file from the other JSON files the tools read and write. It returns
// nil when b is a JSON object with "metadata" and "summary" objects holding every field upstream's
// tool always writes, and otherwise a *NotResultsError saying what b appears to be: not JSON, not an
// object, a users file, a capacity plan, evidence file or manifest, a LinkKeys client result, or an
// unknown object (naming what is missing). Types and consistency are Parse's business.
func CheckShape(b []byte) error {
	trimmed := bytes.TrimLeft(b, " \t\r\n")
	if len(trimmed) == 0 {
		return &NotResultsError{What: "is empty, not a Keycast results file"}
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		if trimmed[0] != '{' && json.Valid(b) {
			return &NotResultsError{What: fmt.Sprintf("is JSON but not an object (it starts with %q), not a Keycast results file", trimmed[0])}
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return &NotResultsError{What: fmt.Sprintf("is JSON but not an object, not a Keycast results file: %v", err)}
		}
		return &NotResultsError{What: fmt.Sprintf("is not valid JSON (%v), so not a Keycast results file", err)}
	}
	if top == nil {
		return &NotResultsError{What: "is JSON null, not a Keycast results file"}
	}
	if what := Describe(top); what != "" {
		_, m := top["metadata"]
		_, sm := top["summary"]
		_, c := top["command"]
		_, u := top["users"]
		return &NotResultsError{What: what, Unknown: !c && !u && !(m && sm) && !strings.Contains(what, "capacity")}
	}
	var missing []string
	for _, part := range []struct {
		name   string
		fields []string
	}{{"metadata", requiredMetadata}, {"summary", requiredSummary}} {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(top[part.name], &obj); err != nil || obj == nil {
			return &NotResultsError{What: fmt.Sprintf("has a %q that is not a JSON object, so it is not a Keycast results file", part.name)}
		}
		for _, f := range part.fields {
			if _, ok := obj[f]; !ok {
				missing = append(missing, part.name+"."+f)
			}
		}
	}
	if len(missing) > 0 {
		shown := missing
		if len(shown) > 6 {
			shown = append(shown[:6:6], fmt.Sprintf("… (%d in all)", len(missing)))
		}
		return &NotResultsError{What: fmt.Sprintf("has \"metadata\" and \"summary\" but lacks %s, which every results file written by run holds; it is not a Keycast results file", strings.Join(shown, ", "))}
	}
	return nil
}

// Describe names, from its top-level keys, a JSON object that is not a Keycast results file: a users
// file, a capacity plan, evidence file or manifest, a LinkKeys client result, or an unknown object
// missing "metadata" and/or "summary". It returns "" when the object has both, which only makes it a
// candidate (see CheckShape).
func Describe(top map[string]json.RawMessage) string {
	has := func(keys ...string) bool {
		for _, k := range keys {
			if _, ok := top[k]; !ok {
				return false
			}
		}
		return true
	}
	switch {
	case has("metadata", "summary"):
		return ""
	case has("users"):
		return "is a users file written by setup (it holds access tokens), not a results file; pass the file that run writes with --output (default ./loadtest-results.json)"
	case has("schema_version", "phases") && (has("evidence_scope") || has("certification_ready")):
		return "is a capacity evidence file (evidence.json), not a results file; each phase's results are in the phase-NN-<name>.json files beside it"
	case has("algorithm", "files"):
		return "is a capacity bundle manifest (manifest.json), not a results file; the phase results are the phase-NN-<name>.json files beside it"
	case has("profile_name", "phases"):
		return "is a capacity plan, not a results file; run it with capacity --plan"
	case has("command"):
		return "is a LinkKeys client result (written with --json), not a Keycast results file; read it with loadproof report"
	}
	var missing []string
	for _, k := range []string{"metadata", "summary"} {
		if !has(k) {
			missing = append(missing, fmt.Sprintf("%q", k))
		}
	}
	keys := make([]string, 0, len(top))
	for k := range top {
		keys = append(keys, fmt.Sprintf("%q", k))
	}
	sort.Strings(keys)
	seen := "no keys at all"
	if len(keys) > 0 {
		if len(keys) > 8 {
			keys = append(keys[:8:8], "…")
		}
		seen = "top-level keys " + strings.Join(keys, ", ")
	}
	return fmt.Sprintf("is an unknown JSON object missing %s (%s), not a Keycast results file", strings.Join(missing, " and "), seen)
}
