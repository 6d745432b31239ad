package report

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/loadproof/loadproof/internal/keycastresult"
	"github.com/loadproof/loadproof/internal/linkkeysresult"
	"github.com/loadproof/loadproof/internal/result"
	"github.com/loadproof/loadproof/internal/search"
)

// Kind is what a file handed to report is, told by its top-level keys alone (Sniff).
type Kind int

// The kinds of file report reads.
const (
	KindUnknown  Kind = iota
	KindLinkKeys      // a LinkKeys client result (harness "linkkeys", or the older form: a command and no metadata)
	KindKeycast       // a Keycast results file (harness "keycast", or upstream's metadata and summary)
	KindEvidence      // a capacity bundle's evidence file (schema_version and phases)
	KindSearch        // a search file (format search.Format)
	KindEnvelope      // another result file in the shared envelope (format result.Format)

	// The exports loadproof writes but does not read back (Open refuses them with ErrExport).
	KindExportText // a text report
	KindExportCSV  // a CSV export (report --format csv)
	KindExportHTML // an HTML page (report --format html, compare, search)
	KindExportHGRM // an HdrHistogram distribution (report --format hgrm)
)

func (k Kind) String() string {
	return [...]string{"unknown", "linkkeys", "keycast", "evidence", "search", "envelope", "text report", "CSV export", "HTML page", "hgrm distribution"}[k]
}

// ErrNotObject is Sniff's error for bytes that are not one JSON object.
var ErrNotObject = errors.New("not a JSON object")

// Sniff tells the kinds of JSON file apart by their top-level keys: the one place that does (Open,
// and through it the report command, the pages, compare and verify, asks it). It reads no more than the top-level object; a
// file that is not a JSON object is ErrNotObject, and an object of no kind here is KindUnknown with
// an error from keycastresult.CheckShape saying what it appears to be (a users file, a plan, a
// manifest, …). Types and consistency are the readers' business.
func Sniff(b []byte) (Kind, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return KindUnknown, fmt.Errorf("%w: %w", ErrNotObject, err)
	}
	if top == nil {
		return KindUnknown, fmt.Errorf("%w: JSON null", ErrNotObject)
	}
	str := func(k string) string {
		var s string
		_ = json.Unmarshal(top[k], &s)
		return s
	}
	has := func(k string) bool { _, ok := top[k]; return ok }
	harness, format := str("harness"), str("format")
	switch {
	case has("schema_version") && has("phases"):
		return KindEvidence, nil
	case format == search.Format:
		return KindSearch, nil
	case harness == linkkeysresult.Harness || harness == "" && has("command") && !has("metadata"):
		return KindLinkKeys, nil
	case harness == "keycast" || has("metadata") && has("summary"):
		return KindKeycast, nil
	case format == result.Format:
		return KindEnvelope, nil
	}
	err := keycastresult.CheckShape(b)
	if err == nil {
		err = fmt.Errorf("an object of no kind report reads")
	}
	return KindUnknown, err
}
