package plan

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// examplePath is the documented example plan, relative to this package.
const examplePath = "../../../docs/capacity-plan.example.json"

func encodePlan(t testing.TB, p *Plan) []byte {
	t.Helper()
	b, err := p.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParsePlanRoundTrip(t *testing.T) {
	p := testPlan()
	b := encodePlan(t, p)
	got, err := ParsePlan(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, p) {
		t.Fatalf("round trip changed the plan:\n got %+v\nwant %+v", got, p)
	}
	// intentional_shedding is written as null when absent, as upstream writes it.
	if !bytes.Contains(b, []byte(`"intentional_shedding": null`)) {
		t.Fatal("absent shedding is not encoded as null")
	}
}

func TestExamplePlanIsValid(t *testing.T) {
	p, err := ReadPlan(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	env, err := Validate(p, ValidateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if env != EnvLocal || len(p.Phases) != 6 || p.Phases[1].IntentionalShedding == nil {
		t.Fatalf("example: env %q, %d phases, spike shedding %v", env, len(p.Phases), p.Phases[1].IntentionalShedding)
	}
}

// mutateJSON decodes the encoded test plan into generic maps, applies f and re-encodes it.
func mutateJSON(t testing.TB, f func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(encodePlan(t, testPlan()), &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func phase(m map[string]any, i int) map[string]any { return m["phases"].([]any)[i].(map[string]any) }

func TestParsePlanRejects(t *testing.T) {
	cases := []struct {
		name string
		doc  []byte
		want []string // each must appear among the problems
	}{
		{"unknown top-level field", mutateJSON(t, func(m map[string]any) { m["platform"] = "gke" }), []string{`platform: unknown field "platform"`}},
		{"unknown nested field", mutateJSON(t, func(m map[string]any) { m["objectives"].(map[string]any)["recovery_seconds"] = 60 }), []string{`objectives.recovery_seconds: unknown field "recovery_seconds"`}},
		{"unknown phase field", mutateJSON(t, func(m map[string]any) { phase(m, 2)["min_intentional_rejection_rate"] = 0.0 }), []string{`phases[2].min_intentional_rejection_rate: unknown field`}},
		{"unknown shedding field", mutateJSON(t, func(m map[string]any) {
			phase(m, 1)["intentional_shedding"].(map[string]any)["retry_after"] = 1
		}), []string{`phases[1].intentional_shedding.retry_after: unknown field`}},
		{"field name in another case", mutateJSON(t, func(m map[string]any) { m["Seed"] = m["seed"]; delete(m, "seed") }), []string{`Seed: unknown field "Seed"`, `seed: missing field "seed"`}},
		{"missing field", mutateJSON(t, func(m map[string]any) { delete(m, "environment_parity") }), []string{`environment_parity: missing field "environment_parity"`}},
		{"missing phase field", mutateJSON(t, func(m map[string]any) { delete(phase(m, 0), "slo_applies") }), []string{`phases[0].slo_applies: missing field "slo_applies"`}},
		{"null required field", mutateJSON(t, func(m map[string]any) { m["target_url"] = nil }), []string{"target_url: expected a string, found null"}},
		{"string for number", mutateJSON(t, func(m map[string]any) { phase(m, 0)["concurrency"] = "10" }), []string{"phases[0].concurrency: expected a non-negative integer, found a string"}},
		{"negative unsigned", mutateJSON(t, func(m map[string]any) { m["seed"] = -1 }), []string{"seed: expected a non-negative integer, found -1"}},
		{"fractional unsigned", mutateJSON(t, func(m map[string]any) { phase(m, 0)["duration_seconds"] = 1.5 }), []string{"phases[0].duration_seconds: expected an integer without fraction or exponent, found 1.5"}},
		{"status above u16", mutateJSON(t, func(m map[string]any) {
			phase(m, 1)["intentional_shedding"].(map[string]any)["status"] = 70000
		}), []string{"phases[1].intentional_shedding.status: 70000 is too large; at most 65535"}},
		{"unknown kind", mutateJSON(t, func(m map[string]any) { phase(m, 3)["kind"] = "Recovery" }), []string{`phases[3].kind: unknown variant "Recovery"; expected one of ramp, spike, soak, recovery, rollout, scale-down`}},
		{"unknown method", mutateJSON(t, func(m map[string]any) { phase(m, 0)["method"] = "sign_event" }), []string{`phases[0].method: unknown variant "sign_event"`}},
		{"unknown scenario", mutateJSON(t, func(m map[string]any) { phase(m, 0)["scenario"] = "hot" }), []string{`phases[0].scenario: unknown variant "hot"`}},
		{"unknown platform", mutateJSON(t, func(m map[string]any) { m["profile_platform"] = "lambda" }), []string{`profile_platform: unknown variant "lambda"; expected one of cloud-run, gke`}},
		{"bool as string", mutateJSON(t, func(m map[string]any) { phase(m, 0)["slo_applies"] = "true" }), []string{"phases[0].slo_applies: expected true or false, found a string"}},
		{"phases not an array", mutateJSON(t, func(m map[string]any) { m["phases"] = map[string]any{} }), []string{"phases: expected an array, found an object"}},
		{"phase not an object", mutateJSON(t, func(m map[string]any) { m["phases"].([]any)[0] = 7 }), []string{"phases[0]: expected an object, found a number"}},
		{"shedding not an object", mutateJSON(t, func(m map[string]any) { phase(m, 1)["intentional_shedding"] = true }), []string{"phases[1].intentional_shedding: expected an object, found a boolean"}},
		{"duplicate field", []byte(`{"seed": 1, "seed": 2}`), []string{`seed: duplicate field "seed"`}},
		{"trailing data", append(encodePlan(t, testPlan()), []byte(" {}")...), []string{"trailing data after the plan object"}},
		{"trailing garbage", append(encodePlan(t, testPlan()), 'x'), []string{"trailing data after the plan object"}},
		{"top level array", []byte(`[]`), []string{"plan: expected an object, found an array"}},
		{"empty", []byte(``), []string{"not valid JSON"}},
		{"syntax error", []byte("{\n  \"seed\": 1,\n}"), []string{"not valid JSON at line 3 column 1"}},
		{"invalid UTF-8", []byte("{\"profile_name\": \"\xff\"}"), []string{"the plan is not valid UTF-8"}},
		{"huge number", mutateJSON(t, func(m map[string]any) { m["objectives"].(map[string]any)["latency_p95_ms"] = json.Number("1e999") }), []string{"objectives.latency_p95_ms: number 1e999 is out of range"}},
		{"too large", bytes.Repeat([]byte(" "), MaxPlanSize+1), []string{"larger than"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := ParsePlan(c.doc)
			if err == nil {
				t.Fatalf("parsed: %+v", p)
			}
			var pe *ParseError
			if !asParseError(err, &pe) {
				t.Fatalf("error %T is not a *ParseError", err)
			}
			for _, w := range c.want {
				found := false
				for _, prob := range pe.Problems {
					if strings.Contains(prob.Error(), w) {
						found = true
					}
				}
				if !found {
					t.Errorf("no problem contains %q; got:\n%v", w, err)
				}
			}
		})
	}
}

func asParseError(err error, pe **ParseError) bool {
	p, ok := err.(*ParseError)
	*pe = p
	return ok
}

func TestParsePlanReportsEveryProblemTogether(t *testing.T) {
	doc := mutateJSON(t, func(m map[string]any) {
		m["extra"] = 1
		delete(m, "seed")
		phase(m, 0)["kind"] = "warmup"
		phase(m, 5)["concurrency"] = -3
	})
	_, err := ParsePlan(doc)
	pe, ok := err.(*ParseError)
	if !ok || len(pe.Problems) != 4 {
		t.Fatalf("want 4 problems, got %v", err)
	}
	if !strings.HasPrefix(err.Error(), "capacity: plan JSON has 4 problems:\n  - ") {
		t.Fatalf("message %q", err)
	}
}

func TestParsePlanSheddingOptional(t *testing.T) {
	for name, doc := range map[string][]byte{
		"null":   mutateJSON(t, func(m map[string]any) { phase(m, 1)["intentional_shedding"] = nil }),
		"absent": mutateJSON(t, func(m map[string]any) { delete(phase(m, 1), "intentional_shedding") }),
	} {
		p, err := ParsePlan(doc)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if p.Phases[1].IntentionalShedding != nil {
			t.Fatalf("%s: shedding %+v", name, p.Phases[1].IntentionalShedding)
		}
	}
	// A float written with a fraction is fine where a float is expected; integers are floats too.
	doc := mutateJSON(t, func(m map[string]any) { m["objectives"].(map[string]any)["latency_p95_ms"] = 250 })
	if p, err := ParsePlan(doc); err != nil || p.Objectives.LatencyP95Ms != 250 {
		t.Fatalf("integer for float: %v", err)
	}
}

func TestReadPlanErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadPlan(filepath.Join(dir, "absent.json")); err == nil || !strings.Contains(err.Error(), "failed to read capacity plan") {
		t.Fatalf("absent: %v", err)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPlan(bad); err == nil || !strings.Contains(err.Error(), "failed to parse capacity plan") {
		t.Fatalf("bad: %v", err)
	}
}

// FuzzParsePlan: ParsePlan never panics; whatever it accepts encodes and parses back to the same plan,
// and Validate accepts or rejects it without panicking.
func FuzzParsePlan(f *testing.F) {
	// Seeds stay small (one compact phase): the fuzzer minimises every new input it finds, and
	// minimising a full six-phase plan would take a whole short fuzzing run.
	one := testPlan()
	one.Phases = one.Phases[1:2]
	b, err := json.Marshal(one)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"seed": 1, "seed": 2}`))
	f.Add([]byte(`{"phases": [{"intentional_shedding": null}]}`))
	f.Add([]byte(`{"profile_name": "\u0000", "seed": 18446744073709551615}`))
	f.Add([]byte(`[1, 2, 3]`))
	f.Add([]byte(`{} {}`))
	f.Add([]byte(`{"cost_per_hour": "1.5USD", "server_cost_per_hour": -0}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParsePlan(b)
		if err != nil {
			if p != nil {
				t.Fatal("plan returned with an error")
			}
			return
		}
		_, _ = Validate(p, ValidateOptions{AllowHost: "example.com"})
		b2, err := p.Encode()
		if err != nil {
			// Only an enum can fail to encode, and ParsePlan accepts only known enum values.
			t.Fatalf("accepted plan does not encode: %v", err)
		}
		p2, err := ParsePlan(b2)
		if err != nil {
			t.Fatalf("re-parse: %v\n%s", err, b2)
		}
		if !reflect.DeepEqual(p, p2) {
			t.Fatalf("round trip changed the plan")
		}
	})
}
