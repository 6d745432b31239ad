package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/loadproof/loadproof/internal/boundedfile"
	"github.com/loadproof/loadproof/internal/cost"
	"github.com/loadproof/loadproof/internal/keycast"
)

// MaxPlanSize bounds a plan file. A complete six-phase plan is about 3 KiB.
const MaxPlanSize = 1 << 20

// Platform is the platform a profile describes. It is recorded as given and does not change behaviour.
type Platform string

// The two platforms upstream knows.
const (
	PlatformCloudRun Platform = "cloud-run"
	PlatformGKE      Platform = "gke"
)

// Platforms lists the accepted platforms.
var Platforms = []Platform{PlatformCloudRun, PlatformGKE}

// Kind is a phase kind.
type Kind string

// The six phase kinds, in the order every plan must declare them.
const (
	KindRamp      Kind = "ramp"
	KindSpike     Kind = "spike"
	KindSoak      Kind = "soak"
	KindRecovery  Kind = "recovery"
	KindRollout   Kind = "rollout"
	KindScaleDown Kind = "scale-down"
)

// RequiredKinds is the exact phase sequence a plan must declare.
var RequiredKinds = []Kind{KindRamp, KindSpike, KindSoak, KindRecovery, KindRollout, KindScaleDown}

// Plan is a capacity plan (docs/protocol-keycast.md, Plan; newest schema). Its JSON field names and
// enum spellings are upstream's; the evidence embeds it as parsed.
type Plan struct {
	ProfileName     string   `json:"profile_name"`
	ProfilePlatform Platform `json:"profile_platform"`
	TargetURL       string   `json:"target_url"`
	// UsersFile is the users file from setup, relative to the working directory (not the plan).
	UsersFile         string         `json:"users_file"`
	Seed              uint64         `json:"seed"`
	Revisions         Revisions      `json:"revisions"`
	EnvironmentParity string         `json:"environment_parity"`
	Objectives        Objectives     `json:"objectives"`
	StopConditions    StopConditions `json:"stop_conditions"`
	Phases            []Phase        `json:"phases"`
	// CostPerHour and ServerCostPerHour, optional, price the load machine and the server's machine
	// per hour, as --cost-per-hour and --server-cost-per-hour do (which override them): each
	// phase's results then record its cost (docs/cost.md).
	CostPerHour       cost.Price `json:"cost_per_hour,omitzero"`
	ServerCostPerHour cost.Price `json:"server_cost_per_hour,omitzero"`
}

// Revisions identifies what was tested.
type Revisions struct {
	Code           string `json:"code"`
	Image          string `json:"image"`
	Infrastructure string `json:"infrastructure"`
}

// Objectives is the profile SLO, checked in every phase whose SLOApplies is set.
type Objectives struct {
	AvailabilityPercent float64 `json:"availability_percent"`
	LatencyP95Ms        float64 `json:"latency_p95_ms"`
}

// StopConditions are the absolute abort limits: checked live during each phase and again on each
// phase's totals; a breach stops the run.
type StopConditions struct {
	MaxErrorRate    float64 `json:"max_error_rate"`
	MaxLatencyP95Ms float64 `json:"max_latency_p95_ms"`
}

// Phase is one predeclared phase.
type Phase struct {
	Name            string           `json:"name"`
	Kind            Kind             `json:"kind"`
	Method          keycast.Method   `json:"method"`
	Scenario        keycast.Scenario `json:"scenario"`
	Concurrency     int              `json:"concurrency"`
	DurationSeconds uint64           `json:"duration_seconds"`
	RampUpSeconds   uint64           `json:"ramp_up_seconds"`
	// MaxErrorRate applies to the unintentional error rate (failures other than intentional shedding).
	MaxErrorRate    float64 `json:"max_error_rate"`
	MaxLatencyP95Ms float64 `json:"max_latency_p95_ms"`
	// SLOApplies adds the profile objectives to the phase's checks; only the spike may clear it.
	SLOApplies bool `json:"slo_applies"`
	// IntentionalShedding, spike only: the minimum rate of HTTP 503 admission_rejected responses the
	// target must show. Nil records shedding as not tested.
	IntentionalShedding *Shedding `json:"intentional_shedding"`
}

// Shedding is the intentional-shedding expectation of a spike phase.
type Shedding struct {
	Status    uint16  `json:"status"`
	ErrorCode string  `json:"error_code"`
	MinRate   float64 `json:"min_rate"`
}

// ParseError lists every problem found while decoding a plan.
type ParseError struct {
	Problems []error
}

func (e *ParseError) Error() string {
	var b strings.Builder
	if len(e.Problems) == 1 {
		b.WriteString("capacity: plan JSON has 1 problem:")
	} else {
		fmt.Fprintf(&b, "capacity: plan JSON has %d problems:", len(e.Problems))
	}
	for _, p := range e.Problems {
		b.WriteString("\n  - ")
		b.WriteString(p.Error())
	}
	return b.String()
}

// Unwrap returns the individual problems.
func (e *ParseError) Unwrap() []error { return e.Problems }

// ReadPlan reads and parses a plan file (it does not validate it).
func ReadPlan(path string) (*Plan, error) {
	return readPlanFile(path, ParsePlan)
}

// readPlanFile reads a plan file of at most MaxPlanSize bytes and decodes it with parse.
func readPlanFile[P any](path string, parse func([]byte) (*P, error)) (*P, error) {
	b, err := boundedfile.Read(path, boundedfile.Kind{Name: "capacity plan", Max: MaxPlanSize})
	if err != nil {
		return nil, fmt.Errorf("capacity: failed to read capacity plan %q: %w", path, err)
	}
	p, err := parse(b)
	if err != nil {
		return nil, fmt.Errorf("capacity: failed to parse capacity plan %q: %w", path, err)
	}
	return p, nil
}

// ParsePlan decodes a plan strictly, as upstream's serde derive does with deny_unknown_fields:
// every field is required except intentional_shedding (which may be absent or null); unknown,
// duplicate or differently-cased field names, wrong types, out-of-range integers and trailing data
// are rejected. All problems are reported together in a *ParseError. ParsePlan does not apply the
// validation rules; call Validate for those.
func ParsePlan(b []byte) (*Plan, error) {
	if len(b) > MaxPlanSize {
		return nil, &ParseError{Problems: []error{fmt.Errorf("the plan is larger than %d bytes; a six-phase plan needs a few KiB", MaxPlanSize)}}
	}
	if !utf8.Valid(b) {
		return nil, &ParseError{Problems: []error{errors.New("the plan is not valid UTF-8")}}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, &ParseError{Problems: []error{syntaxProblem(b, err)}}
	}
	end := dec.InputOffset()
	if rest := bytes.TrimLeft(b[end:], " \t\r\n"); len(rest) > 0 {
		line, col := lineCol(b, int64(len(b)-len(rest)))
		return nil, &ParseError{Problems: []error{fmt.Errorf("trailing data after the plan object at line %d column %d", line, col)}}
	}
	p := &parser{}
	plan := p.plan(raw)
	if len(p.problems) > 0 {
		return nil, &ParseError{Problems: p.problems}
	}
	return plan, nil
}

func syntaxProblem(b []byte, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line, col := lineCol(b, se.Offset-1) // Offset counts the offending byte
		return fmt.Errorf("not valid JSON at line %d column %d: %v", line, col, se)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("not valid JSON: the plan is empty or ends early")
	}
	return fmt.Errorf("not valid JSON: %v", err)
}

func lineCol(b []byte, off int64) (line, col int) {
	off = min(max(off, 0), int64(len(b)))
	before := b[:off]
	return bytes.Count(before, []byte{'\n'}) + 1, int(off) - bytes.LastIndexByte(before, '\n')
}

// parser collects problems while walking the plan.
type parser struct {
	problems []error
}

func (p *parser) fail(path, format string, args ...any) {
	p.problems = append(p.problems, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
}

func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

// jsonKind names the JSON type of a raw value for messages.
func jsonKind(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}

// object splits raw into its members. It reports a non-object, duplicate names and names outside
// fields, and every field of fields that is missing unless listed in optional. It returns nil when raw
// is not an object.
func (p *parser) object(raw json.RawMessage, path string, fields []string, optional ...string) map[string]json.RawMessage {
	what := path
	if what == "" {
		what = "the plan"
	}
	if jsonKind(raw) != "an object" {
		p.fail(orTop(path), "expected an object, found %s", jsonKind(raw))
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // '{'
		p.fail(orTop(path), "malformed object: %v", err)
		return nil
	}
	out := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			p.fail(orTop(path), "malformed object: %v", err)
			return nil
		}
		name, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			p.fail(orTop(path), "malformed object: %v", err)
			return nil
		}
		switch {
		case !slices.Contains(fields, name):
			p.fail(join(path, name), "unknown field %q in %s; expected one of %s", name, what, strings.Join(fields, ", "))
		case out[name] != nil:
			p.fail(join(path, name), "duplicate field %q", name)
		default:
			out[name] = v
		}
	}
	for _, f := range fields {
		if _, ok := out[f]; !ok && !slices.Contains(optional, f) {
			p.fail(join(path, f), "missing field %q", f)
		}
	}
	return out
}

func orTop(path string) string {
	if path == "" {
		return "plan"
	}
	return path
}

// price reads an optional price per machine-hour (a number or a string such as "1.53USD").
func (p *parser) price(obj map[string]json.RawMessage, path, name string) cost.Price {
	raw, ok := obj[name]
	if !ok {
		return cost.Price{}
	}
	var pr cost.Price
	if err := pr.UnmarshalJSON(raw); err != nil {
		p.fail(join(path, name), "%v", strings.TrimPrefix(err.Error(), "cost: "))
		return cost.Price{}
	}
	return pr
}

func (p *parser) str(obj map[string]json.RawMessage, path, name string) string {
	raw, ok := obj[name]
	if !ok {
		return ""
	}
	if jsonKind(raw) != "a string" {
		p.fail(join(path, name), "expected a string, found %s", jsonKind(raw))
		return ""
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		p.fail(join(path, name), "malformed string: %v", err)
		return ""
	}
	return s
}

func (p *parser) boolean(obj map[string]json.RawMessage, path, name string) bool {
	raw, ok := obj[name]
	if !ok {
		return false
	}
	switch string(raw) {
	case "true":
		return true
	case "false":
		return false
	}
	p.fail(join(path, name), "expected true or false, found %s", jsonKind(raw))
	return false
}

// uint reads a non-negative integer no larger than limit, written without fraction or exponent (as
// serde reads an unsigned integer).
func (p *parser) uint(obj map[string]json.RawMessage, path, name string, limit uint64) uint64 {
	raw, ok := obj[name]
	if !ok {
		return 0
	}
	if jsonKind(raw) != "a number" {
		p.fail(join(path, name), "expected a non-negative integer, found %s", jsonKind(raw))
		return 0
	}
	s := string(raw)
	v, err := strconv.ParseUint(s, 10, 64)
	switch {
	case err == nil && v <= limit:
		return v
	case strings.HasPrefix(s, "-"):
		p.fail(join(path, name), "expected a non-negative integer, found %s", s)
	case strings.ContainsAny(s, ".eE"):
		p.fail(join(path, name), "expected an integer without fraction or exponent, found %s", s)
	default:
		p.fail(join(path, name), "%s is too large; at most %d", s, limit)
	}
	return 0
}

func (p *parser) float(obj map[string]json.RawMessage, path, name string) float64 {
	raw, ok := obj[name]
	if !ok {
		return 0
	}
	if jsonKind(raw) != "a number" {
		p.fail(join(path, name), "expected a number, found %s", jsonKind(raw))
		return 0
	}
	v, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsInf(v, 0) {
		p.fail(join(path, name), "number %s is out of range", string(raw))
		return 0
	}
	return v
}

// enum reads a string that must be one of choices.
func enum[T ~string](p *parser, obj map[string]json.RawMessage, path, name string, choices []T) T {
	if _, ok := obj[name]; !ok {
		return ""
	}
	n := len(p.problems)
	s := p.str(obj, path, name)
	if len(p.problems) > n {
		return ""
	}
	if slices.Contains(choices, T(s)) {
		return T(s)
	}
	names := make([]string, len(choices))
	for i, c := range choices {
		names[i] = string(c)
	}
	p.fail(join(path, name), "unknown variant %q; expected one of %s", s, strings.Join(names, ", "))
	return ""
}

var (
	planFields       = []string{"profile_name", "profile_platform", "target_url", "users_file", "seed", "revisions", "environment_parity", "objectives", "stop_conditions", "phases", "cost_per_hour", "server_cost_per_hour"}
	priceFields      = []string{"cost_per_hour", "server_cost_per_hour"}
	revisionFields   = []string{"code", "image", "infrastructure"}
	objectiveFields  = []string{"availability_percent", "latency_p95_ms"}
	stopFields       = []string{"max_error_rate", "max_latency_p95_ms"}
	phaseFields      = []string{"name", "kind", "method", "scenario", "concurrency", "duration_seconds", "ramp_up_seconds", "max_error_rate", "max_latency_p95_ms", "slo_applies", "intentional_shedding"}
	sheddingFields   = []string{"status", "error_code", "min_rate"}
	maxDurationSecs  = uint64(math.MaxInt64 / int64(time.Second)) // the longest time.Duration, in seconds
	maxConcurrency   = uint64(math.MaxInt)
	maxStatus        = uint64(math.MaxUint16)
	maxSeed          = uint64(math.MaxUint64)
	phaseMethods     = keycast.Methods
	phaseScenarios   = keycast.Scenarios
	phaseKinds       = RequiredKinds
	profilePlatforms = Platforms
)

func (p *parser) plan(raw json.RawMessage) *Plan {
	obj := p.object(raw, "", planFields, priceFields...)
	if obj == nil {
		return nil
	}
	pl := &Plan{
		CostPerHour:       p.price(obj, "", "cost_per_hour"),
		ServerCostPerHour: p.price(obj, "", "server_cost_per_hour"),
		ProfileName:       p.str(obj, "", "profile_name"),
		ProfilePlatform:   enum(p, obj, "", "profile_platform", profilePlatforms),
		TargetURL:         p.str(obj, "", "target_url"),
		UsersFile:         p.str(obj, "", "users_file"),
		Seed:              p.uint(obj, "", "seed", maxSeed),
		EnvironmentParity: p.str(obj, "", "environment_parity"),
	}
	if r, ok := obj["revisions"]; ok {
		if o := p.object(r, "revisions", revisionFields); o != nil {
			pl.Revisions = Revisions{
				Code:           p.str(o, "revisions", "code"),
				Image:          p.str(o, "revisions", "image"),
				Infrastructure: p.str(o, "revisions", "infrastructure"),
			}
		}
	}
	if r, ok := obj["objectives"]; ok {
		if o := p.object(r, "objectives", objectiveFields); o != nil {
			pl.Objectives = Objectives{
				AvailabilityPercent: p.float(o, "objectives", "availability_percent"),
				LatencyP95Ms:        p.float(o, "objectives", "latency_p95_ms"),
			}
		}
	}
	if r, ok := obj["stop_conditions"]; ok {
		if o := p.object(r, "stop_conditions", stopFields); o != nil {
			pl.StopConditions = StopConditions{
				MaxErrorRate:    p.float(o, "stop_conditions", "max_error_rate"),
				MaxLatencyP95Ms: p.float(o, "stop_conditions", "max_latency_p95_ms"),
			}
		}
	}
	if r, ok := obj["phases"]; ok {
		pl.Phases = p.phases(r)
	}
	return pl
}

func (p *parser) phases(raw json.RawMessage) []Phase {
	if jsonKind(raw) != "an array" {
		p.fail("phases", "expected an array, found %s", jsonKind(raw))
		return nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		p.fail("phases", "malformed array: %v", err)
		return nil
	}
	out := make([]Phase, 0, len(items))
	for i, item := range items {
		path := fmt.Sprintf("phases[%d]", i)
		o := p.object(item, path, phaseFields, "intentional_shedding")
		if o == nil {
			out = append(out, Phase{})
			continue
		}
		ph := Phase{
			Name:            p.str(o, path, "name"),
			Kind:            enum(p, o, path, "kind", phaseKinds),
			Method:          enum(p, o, path, "method", phaseMethods),
			Scenario:        enum(p, o, path, "scenario", phaseScenarios),
			Concurrency:     int(p.uint(o, path, "concurrency", maxConcurrency)),
			DurationSeconds: p.uint(o, path, "duration_seconds", maxDurationSecs),
			RampUpSeconds:   p.uint(o, path, "ramp_up_seconds", maxDurationSecs),
			MaxErrorRate:    p.float(o, path, "max_error_rate"),
			MaxLatencyP95Ms: p.float(o, path, "max_latency_p95_ms"),
			SLOApplies:      p.boolean(o, path, "slo_applies"),
		}
		if s, ok := o["intentional_shedding"]; ok && string(s) != "null" {
			sp := path + ".intentional_shedding"
			if so := p.object(s, sp, sheddingFields); so != nil {
				ph.IntentionalShedding = &Shedding{
					Status:    uint16(p.uint(so, sp, "status", maxStatus)),
					ErrorCode: p.str(so, sp, "error_code"),
					MinRate:   p.float(so, sp, "min_rate"),
				}
			}
		}
		out = append(out, ph)
	}
	return out
}

// Encode returns the plan as indented JSON, in the field order and spellings ParsePlan reads.
func (pl *Plan) Encode() ([]byte, error) {
	b, err := json.MarshalIndent(pl, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("capacity: encoding plan: %w", err)
	}
	return append(b, '\n'), nil
}
