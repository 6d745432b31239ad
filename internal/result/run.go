package result

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"github.com/loadproof/loadproof/internal/textclip"
	"slices"
	"strings"
)

// RunIDLen is the length of a run ID in hex digits (128 random bits).
const RunIDLen = 32

// NewRunID returns a fresh run ID: 128 random bits in lower-case hex. The command that starts a run
// makes one and hands it to every segment and worker, so the run's files can be told from another
// run's when they are merged.
func NewRunID() string {
	var b [RunIDLen / 2]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it panics on a broken system source)
	return hex.EncodeToString(b[:])
}

// ValidateRunID checks that id has a run ID's form (32 lower-case hex digits); an empty id is
// valid and means "no run ID" (files written before run IDs existed).
func ValidateRunID(id string) error {
	if id == "" {
		return nil
	}
	if len(id) != RunIDLen || strings.Trim(id, "0123456789abcdef") != "" {
		return fmt.Errorf("result: run ID %q is not %d lower-case hex digits (as `loadproof` prints it)", textclip.String(id, 40), RunIDLen)
	}
	return nil
}

// Part is one file offered to a merge: its name (for messages) and its envelope.
type Part struct {
	Name     string
	Envelope *Envelope
}

// Coverage is what a merge of parts covers: the run, the segment count, and the segments no part
// holds (a merge that lacks them is partial).
type Coverage struct {
	RunID   string
	Count   int
	Missing []Segment
}

// CheckRun decides whether parts are the segments of one run, each once: every part must carry the
// same run ID (or, for files written before run IDs, none at all), the same segment count, and no
// segment twice. Segments that no part holds are returned as missing when the parts carry a run ID;
// without one, a merge must be complete (there is no other way to tell two runs apart), so a
// missing segment is refused. It names every part involved in a refusal.
func CheckRun(parts []Part) (Coverage, error) {
	var cov Coverage
	if len(parts) == 0 {
		return cov, fmt.Errorf("result: nothing to merge")
	}
	compare := "; to set different runs side by side use `loadproof report --format html --compare A B`"
	withID, withoutID := "", ""
	for _, p := range parts {
		id := p.Envelope.RunID
		if err := ValidateRunID(id); err != nil {
			return cov, fmt.Errorf("%s: %w", p.Name, err)
		}
		switch {
		case id == "":
			withoutID = p.Name
		case cov.RunID == "":
			cov.RunID, withID = id, p.Name
		case id != cov.RunID:
			return cov, fmt.Errorf("result: %s is run %s but %s is run %s: only the segments of one run merge%s",
				p.Name, id, withID, cov.RunID, compare)
		}
	}
	if withID != "" && withoutID != "" {
		return cov, fmt.Errorf("result: %s carries run ID %s but %s carries none: only the segments of one run merge%s",
			withID, cov.RunID, withoutID, compare)
	}
	owner := map[int]int{} // segment index → part index
	countFrom := ""
	for pi, p := range parts {
		segs := p.Envelope.Segments
		if len(segs) == 0 {
			segs = []Segment{Whole}
		}
		for _, s := range segs {
			if err := s.Validate(); err != nil {
				return cov, fmt.Errorf("%s: %w", p.Name, err)
			}
			s = s.norm()
			if cov.Count == 0 {
				cov.Count, countFrom = s.Count, p.Name
			} else if s.Count != cov.Count {
				return cov, fmt.Errorf("result: %s holds segment %s but %s holds segments of %d: segments of one run are split the same way",
					p.Name, s, countFrom, cov.Count)
			}
			if prev, dup := owner[s.Index]; dup {
				switch {
				case prev == pi:
					return cov, fmt.Errorf("result: %s holds segment %s twice", p.Name, s)
				case parts[prev].Name == p.Name:
					return cov, fmt.Errorf("result: %s is given twice: each segment merges once", p.Name)
				}
				return cov, fmt.Errorf("result: segment %s is in both %s and %s (the same file twice, or a segment run twice): each segment merges once",
					s, parts[prev].Name, p.Name)
			}
			owner[s.Index] = pi
		}
	}
	for i := range cov.Count {
		if _, ok := owner[i]; !ok {
			cov.Missing = append(cov.Missing, Segment{Index: i, Count: cov.Count})
		}
	}
	if len(cov.Missing) > 0 && cov.RunID == "" {
		return cov, fmt.Errorf("result: segments %s are missing and the files carry no run ID (written before run IDs), so nothing shows they are one run: give every segment",
			SegmentList(cov.Missing))
	}
	return cov, nil
}

// MarkPartial records on e the segments a merge lacked: Partial becomes true and MissingSegments
// lists them in order. It does nothing when nothing is missing.
func (e *Envelope) MarkPartial(missing []Segment) {
	if len(missing) == 0 {
		return
	}
	e.Partial = true
	for _, m := range missing {
		if !slices.Contains(e.MissingSegments, m) {
			e.MissingSegments = append(e.MissingSegments, m)
		}
	}
	slices.SortFunc(e.MissingSegments, func(a, b Segment) int { return a.Index - b.Index })
}

// SegmentList renders segments as "2/4, 4/4".
func SegmentList(segs []Segment) string {
	parts := make([]string, len(segs))
	for i, s := range segs {
		parts[i] = s.String()
	}
	return strings.Join(parts, ", ")
}
