package result

import (
	"strings"
	"testing"
)

func TestCheckRun(t *testing.T) {
	const runA, runB = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
	env := func(run string, segs ...Segment) *Envelope { return &Envelope{RunID: run, Segments: segs} }
	seg := func(i, n int) Segment { return Segment{Index: i, Count: n} }
	for _, tc := range []struct {
		name    string
		parts   []*Envelope
		wantErr string
		missing string
	}{
		{"one run complete", []*Envelope{env(runA, seg(0, 2)), env(runA, seg(1, 2))}, "", ""},
		{"one run partial", []*Envelope{env(runA, seg(0, 4)), env(runA, seg(2, 4))}, "", "2/4, 4/4"},
		{"machine fan-out sub-segments", []*Envelope{env(runA, seg(0, 4), seg(1, 4)), env(runA, seg(2, 4), seg(3, 4))}, "", ""},
		{"the same whole-run file twice", []*Envelope{env(runA), env(runA)}, "segment 1/1 is in both", ""},
		{"the same legacy file twice", []*Envelope{env(""), env("")}, "segment 1/1 is in both", ""},
		{"different runs", []*Envelope{env(runA, seg(0, 2)), env(runB, seg(1, 2))}, "--compare", ""},
		{"run ID and none", []*Envelope{env(runA, seg(0, 2)), env("", seg(1, 2))}, "carries none", ""},
		{"duplicate segment", []*Envelope{env(runA, seg(0, 3)), env(runA, seg(0, 3)), env(runA, seg(1, 3))}, "segment 1/3 is in both", ""},
		{"mixed segment counts", []*Envelope{env(runA, seg(0, 2)), env(runA, seg(1, 3))}, "split the same way", ""},
		{"legacy complete", []*Envelope{env("", seg(0, 2)), env("", seg(1, 2))}, "", ""},
		{"legacy incomplete", []*Envelope{env("", seg(0, 3)), env("", seg(1, 3))}, "carry no run ID", ""},
		{"bad run ID", []*Envelope{env("XYZ", seg(0, 2)), env("XYZ", seg(1, 2))}, "hex digits", ""},
		{"segment out of range", []*Envelope{env(runA, seg(5, 2))}, "out of range", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := make([]Part, len(tc.parts))
			for i, e := range tc.parts {
				ps[i] = Part{Name: string(rune('a'+i)) + ".json", Envelope: e}
			}
			cov, err := CheckRun(ps)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := SegmentList(cov.Missing); got != tc.missing {
				t.Fatalf("missing %q, want %q", got, tc.missing)
			}
		})
	}
}

func TestMergeRefusesAnotherRun(t *testing.T) {
	a := &Envelope{Format: Format, Harness: "keycast", Command: "run", RunID: NewRunID()}
	b := &Envelope{Format: Format, Harness: "keycast", Command: "run", RunID: NewRunID()}
	var m Envelope
	if err := m.Merge(a); err != nil {
		t.Fatal(err)
	}
	if err := m.Merge(b); err == nil || !strings.Contains(err.Error(), "one run") {
		t.Fatalf("merged two runs: %v", err)
	}
	if a.RunID == b.RunID || ValidateRunID(a.RunID) != nil {
		t.Fatalf("run IDs %q %q", a.RunID, b.RunID)
	}
}

func TestMarkPartialCarriesThroughMerge(t *testing.T) {
	p := &Envelope{Format: Format, Harness: "h", Command: "c"}
	p.MarkPartial([]Segment{{Index: 2, Count: 3}})
	var m Envelope
	if err := m.Merge(p); err != nil {
		t.Fatal(err)
	}
	if !m.Partial || SegmentList(m.MissingSegments) != "3/3" {
		t.Fatalf("partial %v missing %v", m.Partial, m.MissingSegments)
	}
}
