package report

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/loadproof/loadproof/internal/hist"
)

// HGRM writes the whole-run latency histogram of the sources (merged exactly when there are
// several; a capacity bundle's phases together) as HdrHistogram's percentile-distribution text,
// in milliseconds, for the HdrHistogram plotter. kind selects the latency kind ("latency",
// "uncorrected", a LinkKeys kind); empty means the primary kind ("latency" when present).
func HGRM(srcs []Source, kind string) ([]byte, error) {
	files, err := ParseSources(srcs)
	if err != nil {
		return nil, err
	}
	return HGRMFiles(files, kind)
}

// HGRMFiles is HGRM of files as Open read them.
func HGRMFiles(files []*File, kind string) ([]byte, error) {
	if len(files) == 0 {
		return nil, errors.New("report: no files to draw")
	}
	hs := map[string]*hist.Histogram{}
	add := func(m map[string]*hist.Histogram) {
		for k, h := range m {
			if hs[k] == nil {
				hs[k] = hist.New()
			}
			hs[k].Merge(h)
		}
	}
	for _, f := range files {
		l, err := drawable(f)
		if err != nil {
			return nil, err
		}
		if l.evidence != nil {
			for _, ph := range l.evidence.Phases {
				if r := phaseResults(ph); r != nil && r.Envelope != nil {
					add(r.Histograms)
				}
			}
			continue
		}
		add(l.env.Histograms)
	}
	if kind == "" {
		kind = primaryKind(hs)
	}
	h := hs[kind]
	if h == nil {
		return nil, fmt.Errorf("report: no %q latency histogram in the files; they hold %s", kind, kindList(hs))
	}
	var b bytes.Buffer
	if err := h.WriteHGRM(&b, 1000); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func kindList(hs map[string]*hist.Histogram) string {
	if len(hs) == 0 {
		return "none"
	}
	return strings.Join(slices.Sorted(maps.Keys(hs)), ", ")
}
