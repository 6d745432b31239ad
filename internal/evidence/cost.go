package evidence

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/loadproof/loadproof/internal/cost"
)

// A result file (or an evidence bundle's phase results) may record what the run cost
// (result.Envelope.Cost, docs/cost.md). Its reader recomputes that cost from the file's own prices,
// wall time and figures and refuses a file whose cost disagrees (linkkeysresult.Read,
// keycastresult.Parse), so the ReadResult and Recompute that Verify is given check it; these say
// so in the findings.

// recordedCost returns the cost a result file's JSON records, nil when none.
func recordedCost(data []byte) *cost.Cost {
	var v struct {
		Cost *cost.Cost `json:"cost"`
	}
	if json.Unmarshal(data, &v) != nil {
		return nil
	}
	return v.Cost
}

// costHeld is the finding for a result file whose cost was recomputed, "" when it records none.
func costHeld(data []byte) string {
	c := recordedCost(data)
	if c == nil {
		return ""
	}
	return fmt.Sprintf("cost recomputes from the run's own prices, wall time and figures (%s)", costSummary(c))
}

// bundleCostHeld is the finding for a bundle whose phases record costs, "" when none does.
func bundleCostHeld(b *Bundle) string {
	var parts []*cost.Cost
	for _, ph := range b.Evidence.Phases {
		if c := recordedCost(ph.Results); c != nil {
			parts = append(parts, c)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	total, err := cost.Sum(parts...)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("the cost of each of %d priced phases recomputes from its results (all together %s)", len(parts), costSummary(total))
}

func costSummary(c *cost.Cost) string {
	return cost.Money(c.Total, c.Currency) + " for " + fmt.Sprintf("%.4g", c.Seconds) + " s"
}

// checkMemberCosts reads, with read (VerifyOptions.ReadResult), every result file a record
// bundle's manifest lists that records a cost, so a cost that does not recompute fails the bundle;
// it says how many held.
func checkMemberCosts(f *Findings, dir, record string, read func(path string, data []byte) error) {
	mb, err := readCapped(filepath.Join(dir, ManifestFile), MaxManifestBytes)
	if err != nil {
		return // VerifyManifestOf has said why
	}
	m, err := ParseManifest(mb)
	if err != nil {
		return
	}
	var parts []*cost.Cost
	for _, e := range m.Files {
		if e.Path == record || !ValidMemberName(e.Path) || !strings.HasSuffix(e.Path, ".json") {
			continue
		}
		p := filepath.Join(dir, e.Path)
		data, err := readCapped(p, MaxEvidenceBytes)
		if err != nil {
			continue // the manifest check names it
		}
		c := recordedCost(data)
		if c == nil {
			continue
		}
		if err := read(p, data); err != nil {
			f.fail(err)
			continue
		}
		parts = append(parts, c)
	}
	if len(parts) == 0 {
		return
	}
	if total, err := cost.Sum(parts...); err == nil {
		f.Held = append(f.Held, fmt.Sprintf("the cost of each of %d priced result files recomputes from its own figures (all together %s)", len(parts), costSummary(total)))
	}
}
