package search

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/loadproof/loadproof/internal/atomicfile"
	"github.com/loadproof/loadproof/internal/boundedfile"
	"github.com/loadproof/loadproof/internal/evidence"
	"github.com/loadproof/loadproof/internal/result"
)

// File is the search file's name inside its bundle; LogFile holds the trials' output.
const (
	File    = "search.json"
	LogFile = "trials.log"
)

// MaxSearchBytes caps a search file (a few KiB a step).
const MaxSearchBytes = 16 << 20

// Limits on what a search file may hold, so a hostile one costs bounded work.
const (
	maxSteps  = 1000
	maxTrials = 100
)

// Encode writes the search file's JSON.
func (r *Result) Encode() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // the SLO's < and > stay readable
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return nil, fmt.Errorf("search: encoding the search file: %w", err)
	}
	return buf.Bytes(), nil
}

// Parse decodes and checks a search file.
func Parse(b []byte) (*Result, error) {
	if len(b) > MaxSearchBytes {
		return nil, fmt.Errorf("search file is %d bytes, over the %d-byte cap", len(b), MaxSearchBytes)
	}
	var r Result
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("not a search file: %w", err)
	}
	if r.Format != Format {
		return nil, fmt.Errorf("search file format %q is not %s", r.Format, Format)
	}
	if err := r.Config.Validate(); err != nil {
		return nil, fmt.Errorf("search file configuration: %w", err)
	}
	if r.Config.Resamples < 1 || r.Config.Resamples > 100_000 {
		return nil, fmt.Errorf("search file: %d resamples, want 1 to 100000", r.Config.Resamples)
	}
	if len(r.Steps) > maxSteps {
		return nil, fmt.Errorf("search file has %d steps, over the cap of %d", len(r.Steps), maxSteps)
	}
	for i, st := range r.Steps {
		if st.Index != i+1 || len(st.Trials) > maxTrials || len(st.Trials) > r.Config.Trials {
			return nil, fmt.Errorf("search file step %d: index %d, %d trials (of %d configured)", i+1, st.Index, len(st.Trials), r.Config.Trials)
		}
		for _, t := range st.Trials {
			if t.File != "" && !evidence.ValidMemberName(t.File) {
				return nil, fmt.Errorf("search file step %d: trial file %q is not a plain file name", i+1, t.File)
			}
		}
	}
	return &r, nil
}

// IsSearch reports whether b looks like a search file (its format field).
func IsSearch(b []byte) bool {
	var probe struct {
		Format string `json:"format"`
	}
	return json.Unmarshal(b, &probe) == nil && probe.Format == Format
}

// ReadFile reads and checks a search file, or the search file of a bundle directory.
func ReadFile(path string) (*Result, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		path = filepath.Join(path, File)
	}
	b, err := boundedfile.Read(path, boundedfile.Kind{Name: "search file", Max: MaxSearchBytes})
	if err != nil {
		return nil, err
	}
	r, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// WriteBundle writes the search file into dir (where the trials wrote their result files), then
// the manifest of every member and, with priv, its signature: the same bundle form, manifest and
// signing as a capacity bundle, with search.json as its record.
func WriteBundle(dir string, r *Result, priv ed25519.PrivateKey) error {
	b, err := r.Encode()
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(dir, File), b, 0o644); err != nil {
		return fmt.Errorf("search: writing the bundle: %w", err)
	}
	files := []string{File}
	if _, err := os.Stat(filepath.Join(dir, LogFile)); err == nil {
		files = append(files, LogFile)
	}
	if r.WarmUp != nil && r.WarmUp.File != "" {
		files = append(files, r.WarmUp.File)
	}
	for _, st := range r.Steps {
		for _, t := range st.Trials {
			if t.File != "" {
				files = append(files, t.File)
			}
		}
	}
	return evidence.Seal(dir, files, time.Now(), priv)
}

// IsBundle reports whether path is a search bundle (a directory holding search.json, or that file
// itself inside a directory with a manifest).
func IsBundle(path string) (dir string, ok bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", false
	}
	dir = path
	if !fi.IsDir() {
		if filepath.Base(path) != File {
			return "", false
		}
		dir = filepath.Dir(path)
	}
	if _, err := os.Stat(filepath.Join(dir, File)); err != nil {
		return "", false
	}
	return dir, true
}

// Verify checks a search bundle: every file against the manifest, the search recomputed from the
// trials' result files (each trial's verdict, each step's, the knee, the bracket, what broke and
// the confidence), and the signature.
func Verify(dir string, opts evidence.VerifyOptions) *evidence.Findings {
	return evidence.VerifyRecordBundle(dir, File, func() []string { return Recompute(dir) }, opts)
}

// Recompute rereads a bundle's search file and trial files and returns what differs from the record.
func Recompute(dir string) []string {
	rec, err := ReadFile(filepath.Join(dir, File))
	if err != nil {
		return []string{err.Error()}
	}
	var diffs []string
	re := *rec
	re.Steps = nil
	envs := make([][]*result.Envelope, len(rec.Steps))
	for i, st := range rec.Steps {
		ns := st
		ns.Trials = nil
		held := 0
		for _, t := range st.Trials {
			tr := Trial{File: t.File, ExitCode: t.ExitCode, RunFailed: t.RunFailed}
			if t.File != "" {
				env, err := ReadResultFile(filepath.Join(dir, t.File))
				if err != nil {
					diffs = append(diffs, fmt.Sprintf("step %d trial %d: %v", st.Index, t.Trial, err))
					continue
				}
				tr.Env = env
			}
			envs[i] = append(envs[i], tr.Env)
			ts := Summarise(&rec.Config, tr, st.Value)
			ts.Trial = t.Trial
			if ts.Held != t.Held {
				diffs = append(diffs, fmt.Sprintf("step %d trial %d: the SLO %s in its result file; the search file says %s", st.Index, t.Trial, heldWord(ts.Held), heldWord(t.Held)))
			}
			if ts.Held {
				held++
			}
			ns.Trials = append(ns.Trials, ts)
		}
		passed := held == rec.Config.Trials && len(st.Trials) == rec.Config.Trials
		if passed != st.Passed {
			diffs = append(diffs, fmt.Sprintf("step %d (%s %v): recomputed passed=%v; the search file says %v", st.Index, rec.Config.Vary, st.Value, passed, st.Passed))
		}
		ns.Passed = passed
		re.Steps = append(re.Steps, ns)
	}
	Conclude(&re, envs)
	cmp := func(what string, a, b *float64) {
		if (a == nil) != (b == nil) || (a != nil && *a != *b) {
			diffs = append(diffs, fmt.Sprintf("%s: recomputed %s; the search file says %s", what, fmtPtr(a), fmtPtr(b)))
		}
	}
	cmp("knee", re.Knee, rec.Knee)
	cmp("first failing value", re.FirstFail, rec.FirstFail)
	cmp("confidence at the knee", re.Confidence.HoldsAtKnee, rec.Confidence.HoldsAtKnee)
	cmp("confidence at the first failure", re.Confidence.FailsAtFail, rec.Confidence.FailsAtFail)
	if fmt.Sprint(re.BrokeFirst) != fmt.Sprint(rec.BrokeFirst) {
		diffs = append(diffs, fmt.Sprintf("what broke first: recomputed %v; the search file says %v", re.BrokeFirst, rec.BrokeFirst))
	}
	return diffs
}

func heldWord(b bool) string {
	if b {
		return "holds"
	}
	return "does not hold"
}

func fmtPtr(p *float64) string {
	if p == nil {
		return "none"
	}
	return FormatValue(*p)
}
