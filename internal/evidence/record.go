package evidence

import (
	"path/filepath"
)

// VerifyRecordBundle checks a bundle whose record is recordFile rather than evidence.json (a knee
// search's search.json beside its trials' result files): every file against the manifest (the record
// among them), what recompute finds different from the record (nil recompute leaves it out), and the
// manifest's signature (evidence.sig), against opts.Key when given.
func VerifyRecordBundle(dir, recordFile string, recompute func() []string, opts VerifyOptions) *Findings {
	f := &Findings{Path: dir, Bundle: true}
	if err := VerifyManifestOf(dir, recordFile); err != nil {
		f.fail(err)
	} else {
		f.Held = append(f.Held, "every file matches its SHA-256 in "+ManifestFile)
	}
	if recompute != nil {
		if diffs := recompute(); len(diffs) > 0 {
			for _, d := range diffs {
				f.Problems = append(f.Problems, "recomputed: "+d)
			}
		} else {
			f.Held = append(f.Held, recordFile+" recomputes from the bundle's result files as recorded")
		}
	}
	if opts.ReadResult != nil {
		checkMemberCosts(f, dir, recordFile, opts.ReadResult)
	}
	checkSignature(f, filepath.Join(dir, SignatureFile), filepath.Join(dir, ManifestFile), ManifestFile, opts.Key)
	return f
}
