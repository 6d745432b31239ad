package coord

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"reflect"
	"strings"
	"time"

	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/keycastload"
	"github.com/loadproof/loadproof/internal/textclip"
)

// KeycastSpec is a Keycast task as it travels to a worker: the allow-listed settings of one
// `keycast run`, typed. A worker decodes it strictly (DecodeKeycastSpec: an unknown field is
// refused, never ignored), checks it once (Validate) and runs it through keycastload in the
// library: no command line is rebuilt and re-entered on the worker, so a task cannot open a
// dashboard, write an output file or carry any other flag of the command. Stop conditions are not
// passed on: the coordinator judges them on the merged window. Durations are whole milliseconds.
type KeycastSpec struct {
	URL              string  `json:"url"`
	Concurrency      int     `json:"concurrency"`
	Requests         int64   `json:"requests,omitempty"`
	DurationMs       int64   `json:"duration_ms,omitempty"`
	RampUpMs         int64   `json:"ramp_up_ms,omitempty"`
	Seed             uint64  `json:"seed,omitempty"`
	ReportIntervalMs int64   `json:"report_interval_ms"`
	Scenario         string  `json:"scenario,omitempty"`
	Method           string  `json:"method,omitempty"`
	Rate             float64 `json:"rate,omitempty"`
	RateFrom         float64 `json:"rate_from,omitempty"`
	TimeoutMs        int64   `json:"timeout_ms,omitempty"`
	HTTPClient       string  `json:"http_client,omitempty"`
	// UsersFile and CACertFile are read on the worker's machine, at the same path: the worker's
	// file rule (WorkerConfig.TaskFiles) decides whether a task may name them.
	UsersFile          string `json:"users_file,omitempty"`
	CACertFile         string `json:"ca_cert_file,omitempty"`
	InsecureSkipVerify bool   `json:"insecure_skip_verify,omitempty"`
}

// Bounds of a KeycastSpec: a task past them is refused, whatever signed it.
const (
	// MaxKeycastSpecBytes bounds an encoded spec: its fields fit in well under 1 KiB.
	MaxKeycastSpecBytes = 16 << 10
	// maxSpecText bounds the URL and each path.
	maxSpecText = 4096
	// maxSpecDuration bounds every duration of a spec (a week: longer is no load test).
	maxSpecDuration = 7 * 24 * time.Hour
	// maxSpecConcurrency bounds one worker's share of concurrency before its segment split.
	maxSpecConcurrency = 10_000_000
)

// keycastSpecFields are the JSON names of KeycastSpec's fields: the allow list a refusal quotes.
var keycastSpecFields = func() []string {
	var out []string
	t := reflect.TypeFor[KeycastSpec]()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		out = append(out, name)
	}
	return out
}()

// NewKeycastSpec is the spec of a Keycast run configuration: what every worker runs its segment
// of. The users file goes only with a method that sends as users.
func NewKeycastSpec(cfg keycastload.RunConfig) KeycastSpec {
	ms := func(d time.Duration) int64 { return d.Milliseconds() }
	s := KeycastSpec{
		URL: cmpOr(cfg.URL, keycastload.DefaultURL), Concurrency: max(cfg.Concurrency, 1), Requests: cfg.Requests,
		DurationMs: ms(cfg.Duration), RampUpMs: ms(cfg.RampUp), Seed: cfg.Seed,
		ReportIntervalMs: ms(max(cfg.ReportInterval, time.Second)),
		Scenario:         string(cfg.Scenario), Method: string(cfg.Method),
		Rate: cfg.Rate, TimeoutMs: ms(cfg.HTTPTimeout), HTTPClient: cfg.HTTPClient,
		CACertFile: cfg.TLS.CACertFile, InsecureSkipVerify: cfg.TLS.InsecureSkipVerify,
	}
	if cfg.Rate > 0 {
		s.RateFrom = cfg.RateFrom
	}
	if cfg.Method != keycast.MethodRegister {
		s.UsersFile = cfg.UsersFile
	}
	return s
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// DecodeKeycastSpec reads a spec as it arrived in a task: at most MaxKeycastSpecBytes, exactly one
// JSON object, only KeycastSpec's fields, then Validate. The error says what is wrong and which
// fields a task may carry.
func DecodeKeycastSpec(b []byte) (KeycastSpec, error) {
	var s KeycastSpec
	if len(b) > MaxKeycastSpecBytes {
		return s, fmt.Errorf("%w: the Keycast task spec is %d bytes; at most %d are taken", ErrRefused, len(b), MaxKeycastSpecBytes)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return s, fmt.Errorf("%w: the task carries no Keycast spec", ErrRefused)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return KeycastSpec{}, fmt.Errorf("%w: field %s is not one a Keycast task may carry (allowed: %s)", ErrRefused,
				clip(f), strings.Join(keycastSpecFields, ", "))
		}
		return KeycastSpec{}, fmt.Errorf("%w: the Keycast task spec is not a spec object: %v", ErrRefused, clipErr(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return KeycastSpec{}, fmt.Errorf("%w: the Keycast task spec has data after its object", ErrRefused)
	}
	if err := s.Validate(); err != nil {
		return KeycastSpec{}, err
	}
	return s, nil
}

// clip bounds text quoted from a task in a message.
func clip(s string) string { return textclip.String(s, 80) }

func clipErr(err error) string { return clip(err.Error()) }

// Validate checks a spec once, in the library, before a worker runs anything: every field within
// its bounds and meaning what `keycast run` would accept. Host authorization is the worker's own
// (its host rules), and the files it names pass its file rule.
func (s KeycastSpec) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	switch u, err := url.Parse(s.URL); {
	case len(s.URL) > maxSpecText:
		bad("url is %d bytes; at most %d", len(s.URL), maxSpecText)
	case err != nil:
		bad("url %q: %v", clip(s.URL), err)
	case u.Scheme != "http" && u.Scheme != "https":
		bad("url %q: want an http or https base URL", clip(s.URL))
	case u.Hostname() == "":
		bad("url %q names no host", clip(s.URL))
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		bad("url %q: a base URL carries no user, query or fragment", clip(s.URL))
	}
	if s.Concurrency < 1 || s.Concurrency > maxSpecConcurrency {
		bad("concurrency %d: want 1 to %d", s.Concurrency, maxSpecConcurrency)
	}
	if s.Requests < 0 {
		bad("requests %d: want 0 (unlimited) or more", s.Requests)
	}
	for _, d := range []struct {
		name string
		ms   int64
	}{{"duration_ms", s.DurationMs}, {"ramp_up_ms", s.RampUpMs}, {"report_interval_ms", s.ReportIntervalMs}, {"timeout_ms", s.TimeoutMs}} {
		if d.ms < 0 || d.ms > maxSpecDuration.Milliseconds() {
			bad("%s %d: want 0 to %d", d.name, d.ms, maxSpecDuration.Milliseconds())
		}
	}
	if s.DurationMs == 0 && s.Requests == 0 {
		bad("duration_ms 0 runs until the requests are done, so it needs requests > 0")
	}
	if s.ReportIntervalMs < time.Second.Milliseconds() {
		bad("report_interval_ms %d: want at least 1000", s.ReportIntervalMs)
	}
	if s.Scenario != "" {
		if _, err := keycast.ParseScenario(s.Scenario); err != nil {
			bad("scenario: %v", err)
		}
	}
	if s.Method != "" {
		if _, err := keycast.ParseMethod(s.Method); err != nil {
			bad("method: %v", err)
		}
	}
	if math.IsNaN(s.Rate) || math.IsInf(s.Rate, 0) || s.Rate < 0 {
		bad("rate %v: want a finite rate of 0 (closed model) or more", s.Rate)
	}
	if math.IsNaN(s.RateFrom) || math.IsInf(s.RateFrom, 0) || s.RateFrom < 0 {
		bad("rate_from %v: want a finite rate of 0 or more", s.RateFrom)
	} else if s.RateFrom > 0 && !(s.Rate > 0) {
		bad("rate_from needs rate (the open model)")
	}
	if s.HTTPClient != "" && s.HTTPClient != keycastload.HTTPClientFast && s.HTTPClient != keycastload.HTTPClientStd {
		bad("http_client %q: want %s or %s", clip(s.HTTPClient), keycastload.HTTPClientFast, keycastload.HTTPClientStd)
	}
	if s.Method != string(keycast.MethodRegister) && s.UsersFile == "" {
		bad("users_file is empty; method %s sends as the users of a users file", cmpOr(s.Method, string(keycast.MethodSignEvent)))
	}
	for _, p := range []struct{ name, v string }{{"users_file", s.UsersFile}, {"ca_cert_file", s.CACertFile}} {
		if len(p.v) > maxSpecText || strings.ContainsRune(p.v, 0) {
			bad("%s: not a usable path (at most %d bytes, no NUL)", p.name, maxSpecText)
		}
	}
	if s.CACertFile != "" && s.InsecureSkipVerify {
		bad("ca_cert_file and insecure_skip_verify contradict each other; give one")
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: the Keycast task spec: %w", ErrRefused, errors.Join(errs...))
	}
	return nil
}

// Files are the files a spec reads on the worker's machine, for its file rule.
func (s KeycastSpec) Files() []string {
	var out []string
	for _, f := range []string{s.UsersFile, s.CACertFile} {
		if f != "" {
			out = append(out, f)
		}
	}
	return out
}

// RunConfig is the run configuration a worker runs (before its segment, start and sampling are
// set from the task).
func (s KeycastSpec) RunConfig() keycastload.RunConfig {
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	return keycastload.RunConfig{
		URL: s.URL, Concurrency: s.Concurrency, Requests: s.Requests,
		Duration: ms(s.DurationMs), RampUp: ms(s.RampUpMs), Seed: s.Seed, ReportInterval: ms(s.ReportIntervalMs),
		Scenario: keycast.Scenario(s.Scenario), Method: keycast.Method(s.Method), UsersFile: s.UsersFile,
		Rate: s.Rate, RateFrom: s.RateFrom, HTTPTimeout: ms(s.TimeoutMs), HTTPClient: s.HTTPClient,
		TLS: keycastload.TLSOptions{CACertFile: s.CACertFile, InsecureSkipVerify: s.InsecureSkipVerify},
	}
}

// runKeycastSpec is a worker's default Keycast runner: it reads the users file a method needs and
// runs cfg with keycastload.Run.
func runKeycastSpec(ctx context.Context, cfg keycastload.RunConfig) (any, error) {
	if cfg.Method != keycast.MethodRegister {
		uf, err := keycast.ReadUsersFile(cfg.UsersFile)
		if err != nil {
			return nil, err
		}
		cfg.Users = uf.Users
	}
	res, err := keycastload.Run(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return res, nil
}
