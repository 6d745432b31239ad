package report

import (
	"strings"
	"testing"

	"github.com/loadproof/loadproof/internal/keycastresult"
	"github.com/loadproof/loadproof/internal/linkkeysresult"
)

func TestMergeResultsRefusesWhatDoesNotMerge(t *testing.T) {
	kc := &File{Path: "kc.json", Kind: KindKeycast, Keycast: &keycastresult.Results{}}
	lk := &File{Path: "lk.json", Kind: KindLinkKeys, LinkKeys: &linkkeysresult.Result{}}
	ev := &File{Path: "ev/evidence.json", Kind: KindEvidence}

	if m, err := MergeResults([]*File{kc}); err != nil || m.Keycast != kc.Keycast || m.LinkKeys != nil || m.Kind != KindKeycast {
		t.Errorf("one Keycast file: %+v, %v; want it as it is", m, err)
	}
	if m, err := MergeResults([]*File{lk}); err != nil || m.LinkKeys == nil || m.Keycast != nil || m.Kind != KindLinkKeys {
		t.Errorf("one LinkKeys file: %+v, %v; want it as it is", m, err)
	}
	for _, c := range []struct {
		files []*File
		want  string
	}{
		{[]*File{kc, lk}, "lk.json is a linkkeys result but kc.json is a keycast result; merge files of one kind"},
		{[]*File{ev}, "ev/evidence.json is a evidence file, neither a LinkKeys client result nor a Keycast results file"},
		{[]*File{kc, ev}, "ev/evidence.json is a evidence file"},
	} {
		if _, err := MergeResults(c.files); err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "report: ") {
			t.Errorf("%d files: %v; want %q", len(c.files), err, c.want)
		}
	}
	if err := SameHarness(ev, "kc.json", KindKeycast); err != nil {
		t.Errorf("SameHarness after a file that is no result: %v; want nil (that file is refused on its own)", err)
	}
}
