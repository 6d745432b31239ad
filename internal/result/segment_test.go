package result

import (
	"strings"
	"testing"
)

func TestParseSegment(t *testing.T) {
	for in, want := range map[string]Segment{"": {}, "1/1": {Index: 0, Count: 1}, "2/4": {Index: 1, Count: 4}, " 4 / 4 ": {Index: 3, Count: 4}, "10000/10000": {Index: 9999, Count: 10000}} {
		if got, err := ParseSegment(in); err != nil || got != want {
			t.Errorf("ParseSegment(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"0/4", "5/4", "1/0", "a/b", "3", "1/10001", "1/9223372036854775807"} {
		if _, err := ParseSegment(in); err == nil {
			t.Errorf("ParseSegment(%q) succeeded", in)
		} else if !strings.Contains(err.Error(), "want I/N") && !strings.Contains(err.Error(), "at most") {
			t.Errorf("ParseSegment(%q): %v does not say what is wanted", in, err)
		}
	}
}

// FuzzParseSegment: a segment read from a flag is either refused or a valid segment that prints
// back to a string that reads to the same segment.
func FuzzParseSegment(f *testing.F) {
	for _, s := range []string{"", "1/1", "2/4", " 4 / 4 ", "10000/10000", "0/4", "5/4", "1/0", "a/b", "3", "1/10001", "-1/-2", "1/9223372036854775807", "+1/+2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		seg, err := ParseSegment(s)
		if err != nil {
			if seg != (Segment{}) {
				t.Fatalf("ParseSegment(%q) failed (%v) but returned %v", s, err, seg)
			}
			return
		}
		if err := seg.Validate(); err != nil {
			t.Fatalf("ParseSegment(%q) = %v, which is invalid: %v", s, seg, err)
		}
		if seg.Count > MaxSegments {
			t.Fatalf("ParseSegment(%q) = %v, above MaxSegments", s, seg)
		}
		if s == "" {
			return
		}
		back, err := ParseSegment(seg.String())
		if err != nil || back != seg {
			t.Fatalf("ParseSegment(%q) = %v prints %q, which reads back as %v, %v", s, seg, seg.String(), back, err)
		}
	})
}
