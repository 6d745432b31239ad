package report

import (
	"fmt"

	"github.com/loadproof/loadproof/internal/keycastresult"
	"github.com/loadproof/loadproof/internal/linkkeysresult"
)

// Merged is the one run that result files of one harness make up (segments of it, or the one file
// itself). LinkKeys or Keycast is set, as Kind says.
type Merged struct {
	Kind     Kind
	LinkKeys *linkkeysresult.Result
	Keycast  *keycastresult.Results
}

// MergeResults merges result files of one harness into their run (linkkeysresult.MergeRun,
// keycastresult.MergeRun). A file that is no run's result, files of two harnesses and segments that
// are not of one run are refused, with the file named. files must not be empty.
func MergeResults(files []*File) (*Merged, error) {
	var lk []linkkeysresult.Result
	var kc []*keycastresult.Results
	var names []string
	for _, f := range files {
		if !f.IsResult() {
			return nil, fmt.Errorf("report: %s is a %s file, neither a LinkKeys client result nor a Keycast results file; --format html draws any result file with the shared envelope", f.Path, f.Kind)
		}
		if err := SameHarness(files[0], f.Path, f.Kind); err != nil {
			return nil, err
		}
		names = append(names, f.Path)
		if f.LinkKeys != nil {
			lk = append(lk, *f.LinkKeys)
		} else {
			kc = append(kc, f.Keycast)
		}
	}
	m := &Merged{Kind: files[0].Kind}
	if m.Kind == KindLinkKeys {
		r := lk[0]
		if len(lk) > 1 {
			var err error
			if r, err = linkkeysresult.MergeRun(names, lk); err != nil {
				return nil, fmt.Errorf("report: merging: %w", err)
			}
		}
		m.LinkKeys = &r
		return m, nil
	}
	r := kc[0]
	if len(kc) > 1 {
		var err error
		if r, err = keycastresult.MergeRun(names, kc); err != nil {
			return nil, fmt.Errorf("report: merging: %w", err)
		}
	}
	m.Keycast = r
	return m, nil
}

// SameHarness refuses a result of kind at path to merge with first, a result of another harness
// (nil when first is no result: that is refused on its own).
func SameHarness(first *File, path string, kind Kind) error {
	if !first.IsResult() || first.Kind == kind {
		return nil
	}
	return fmt.Errorf("report: %s is a %s result but %s is a %s result; merge files of one kind", path, kind, first.Path, first.Kind)
}
