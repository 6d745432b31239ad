package report

import (
	"bytes"
	"fmt"
	"html"
	"io"

	"github.com/loadproof/loadproof/internal/result"
)

// TamperedText writes the notice a report puts at the top of a bundle or file that failed
// verification (evidence.Verify): the word TAMPERED and every finding, one line each.
func TamperedText(w io.Writer, path string, problems []string) {
	fmt.Fprintf(w, "TAMPERED: %s does not verify; its figures below cannot be trusted:\n", path)
	for _, p := range problems {
		fmt.Fprintf(w, "  - %s\n", p)
	}
	fmt.Fprintln(w)
}

// MarkTampered puts the TAMPERED notice at the top of a report page, above the drawn report, with
// every finding escaped.
func MarkTampered(page []byte, path string, problems []string) []byte {
	var b bytes.Buffer
	b.WriteString(`<div role="alert" id="lp-tampered" style="background:#b00020;color:#fff;padding:1em;font:bold 1.1em sans-serif">`)
	fmt.Fprintf(&b, "TAMPERED: %s does not verify; the figures below cannot be trusted.<ul>", html.EscapeString(path))
	for _, p := range problems {
		fmt.Fprintf(&b, "<li>%s</li>", html.EscapeString(p))
	}
	b.WriteString("</ul></div>\n")
	const body = "<body>\n"
	i := bytes.Index(page, []byte(body))
	if i < 0 {
		return append(b.Bytes(), page...)
	}
	i += len(body)
	out := make([]byte, 0, len(page)+b.Len())
	out = append(out, page[:i]...)
	out = append(out, b.Bytes()...)
	return append(out, page[i:]...)
}

// PartialNotice is the line a report of a merged result starts with when the merge lacked some of
// the run's segments (result.Envelope.Partial); empty otherwise.
func PartialNotice(e *result.Envelope) string {
	if e == nil || !e.Partial {
		return ""
	}
	return fmt.Sprintf("PARTIAL RESULT: segments %s of run %s are missing; the figures are those of the segments present, not of the whole run",
		result.SegmentList(e.MissingSegments), e.RunID)
}
