package report

import (
	"errors"
	"testing"
)

// TestSniff: every kind of file report reads is told apart by its top-level keys alone, and what is
// none of them is refused saying what it is.
func TestSniff(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Kind
		err  bool
	}{
		{`{"format":"loadproof.result/v2","harness":"linkkeys","command":"connections"}`, KindLinkKeys, false},
		{`{"command":"connections","connections":{}}`, KindLinkKeys, false},
		{`{"format":"loadproof.result/v2","harness":"keycast","metadata":{},"summary":{}}`, KindKeycast, false},
		{`{"metadata":{},"summary":{}}`, KindKeycast, false},
		{`{"schema_version":2,"phases":[]}`, KindEvidence, false},
		{`{"format":"loadproof.search/v1"}`, KindSearch, false},
		{`{"format":"loadproof.result/v2","harness":"other"}`, KindEnvelope, false},
		{`{"users":[]}`, KindUnknown, true},
		{`[1,2]`, KindUnknown, true},
		{`null`, KindUnknown, true},
		{`not json`, KindUnknown, true},
	} {
		k, err := Sniff([]byte(c.in))
		if k != c.want || (err != nil) != c.err {
			t.Errorf("Sniff(%s) = %v, %v; want %v (error %v)", c.in, k, err, c.want, c.err)
		}
	}
	if _, err := Sniff([]byte(`[1]`)); !errors.Is(err, ErrNotObject) {
		t.Errorf("an array: %v, want ErrNotObject", err)
	}
}

func FuzzSniff(f *testing.F) {
	for _, s := range []string{`{"harness":"linkkeys"}`, `{"metadata":{},"summary":{}}`, `{"schema_version":1,"phases":[]}`, `[]`, `"x"`, `{"format":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := Sniff(b)
		if k == KindUnknown && err == nil {
			t.Fatalf("unknown without a reason: %q", b)
		}
		if k != KindUnknown && err != nil {
			t.Fatalf("kind %v with an error %v: %q", k, err, b)
		}
		_ = k.String()
	})
}
