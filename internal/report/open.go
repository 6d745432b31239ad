package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/loadproof/loadproof/internal/boundedfile"
	"github.com/loadproof/loadproof/internal/evidence"
	"github.com/loadproof/loadproof/internal/keycastresult"
	"github.com/loadproof/loadproof/internal/linkkeysresult"
	"github.com/loadproof/loadproof/internal/result"
	"github.com/loadproof/loadproof/internal/search"
)

// File is one file given to loadproof to read, as Open read it: what kind it is and its one model.
// Exactly one of LinkKeys, Keycast, Evidence, Search and (for KindEnvelope) Envelope is set.
type File struct {
	// Path is the file read: the path given, or for a bundle's directory the record inside it
	// (evidence.json, search.json).
	Path string
	// Dir is a bundle's directory (KindEvidence, KindSearch): where its members and manifest lie.
	Dir string
	// Kind is what the file is.
	Kind Kind
	// Data is the file's bytes as read (at most the cap of its kind).
	Data []byte

	LinkKeys *linkkeysresult.Result
	Keycast  *keycastresult.Results
	Evidence *evidence.Evidence
	Search   *search.Result
	// Envelope is the run's shared envelope, validated, where the file carries one: every LinkKeys
	// result, a Keycast result written by loadproof (nil in upstream's schema) and KindEnvelope.
	Envelope *result.Envelope
	// Stop is the run's stop event, when it stopped on a condition.
	Stop *result.StopEvent
	// Refused is a LinkKeys result's refusals by design by reason (its refused field).
	Refused map[string]int64
}

// IsResult reports whether the file is a run's result file of either harness (what report merges,
// compare compares and verify checks).
func (f *File) IsResult() bool { return f.Kind == KindLinkKeys || f.Kind == KindKeycast }

// OpenError is Open's refusal of a file: the file, what it was told to be (KindUnknown when
// nothing could be told) and what is wrong. Its message starts with the path.
type OpenError struct {
	Path string
	Kind Kind
	Err  error
}

func (e *OpenError) Error() string {
	if msg := e.Err.Error(); strings.HasPrefix(msg, "is ") {
		return e.Path + " " + msg // "x.csv is a CSV export …"
	}
	return e.Path + ": " + e.Err.Error()
}

// Unwrap returns the underlying error (a *boundedfile.Error, a *keycastresult.NotResultsError, a
// reader's error).
func (e *OpenError) Unwrap() error { return e.Err }

// ErrExport is the error (errors.Is) of a file that loadproof writes but does not read back: a text
// report, a CSV export, an HTML page or an .hgrm distribution.
var ErrExport = errors.New("loadproof reads result files (.json), not the exports it writes")

// searchKind is the bounded read of a search file (search.MaxSearchBytes).
var searchKind = boundedfile.Kind{Name: "search file", Max: search.MaxSearchBytes}

// Open is the one door by which loadproof reads a file it is given (report, compare, verify, cost,
// the pages): it reads the file within a size cap (boundedfile: regular files only; a bundle's
// evidence.json at most boundedfile.Evidence, a search file search.MaxSearchBytes, anything else
// boundedfile.Result; a file told to be evidence or a search by its content is held to the same
// cap), tells its kind (Sniff, or an export loadproof writes but does not
// read back), and parses it into the one model of that kind. A directory stands for the bundle in
// it (a capacity bundle's evidence.json, a search bundle's search.json). Every refusal names the
// file and the problem: an *OpenError, a *boundedfile.Error (not a regular file, over its cap) or a
// *keycastresult.NotResultsError (a JSON object of no kind loadproof reads, saying what it seems
// to be).
func Open(path string) (*File, error) {
	file, cap := path, boundedfile.Result
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		switch {
		case isFile(filepath.Join(path, evidence.EvidenceFile)):
			file = filepath.Join(path, evidence.EvidenceFile)
		case isFile(filepath.Join(path, search.File)):
			file = filepath.Join(path, search.File)
		default:
			return nil, &OpenError{Path: path, Err: fmt.Errorf("is a directory holding neither a capacity evidence bundle (%s) nor a search bundle (%s); give a result file or a bundle's directory", evidence.EvidenceFile, search.File)}
		}
	}
	switch filepath.Base(file) {
	case evidence.EvidenceFile:
		cap = boundedfile.Evidence
	case search.File:
		cap = searchKind
	}
	b, err := boundedfile.Read(file, cap)
	if err != nil {
		// boundedfile's message names the file and what is wrong with it.
		return nil, err
	}
	f, err := Parse(file, b)
	if err != nil {
		return nil, err
	}
	if f.Kind == KindEvidence || f.Kind == KindSearch {
		f.Dir = filepath.Dir(file)
	}
	return f, nil
}

func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir()
}

// Parse is Open for bytes already read within a cap (a bundle's member, a source handed over in
// memory): name names the file in messages.
func Parse(name string, b []byte) (*File, error) {
	f := &File{Path: name, Data: b}
	refuse := func(err error) (*File, error) { return nil, &OpenError{Path: name, Kind: f.Kind, Err: err} }
	if k, what := exportKind(b); k != KindUnknown {
		f.Kind = k
		return refuse(fmt.Errorf("is %s; %w: %s", what, ErrExport, exportRemedy))
	}
	kind, serr := Sniff(b)
	f.Kind = kind
	tooLarge := func(k boundedfile.Kind) error {
		return fmt.Errorf("is %d bytes, larger than the %d-byte cap on %ss; this is not a file loadproof wrote", len(b), k.Max, k.Name)
	}
	switch kind {
	case KindUnknown:
		if errors.Is(serr, ErrNotObject) {
			serr = notObject(b)
		}
		var ne *keycastresult.NotResultsError
		if errors.As(serr, &ne) {
			if ne.Unknown {
				ne.What += `; nor is it a LinkKeys client result (no "command"): neither a LinkKeys client result nor a Keycast results file`
			}
			ne.Path = name
			return nil, ne // its message starts with the path
		}
		return refuse(serr)
	case KindEvidence:
		if int64(len(b)) > boundedfile.Evidence.Max {
			return refuse(tooLarge(boundedfile.Evidence))
		}
		ev, err := evidence.Parse(b)
		if err != nil {
			return refuse(err)
		}
		f.Evidence = ev
	case KindSearch:
		if int64(len(b)) > searchKind.Max {
			return refuse(tooLarge(searchKind))
		}
		s, err := search.Parse(b)
		if err != nil {
			return refuse(err)
		}
		f.Search = s
	case KindKeycast:
		r, err := keycastresult.Parse(b)
		if err != nil {
			return refuse(err)
		}
		f.Keycast, f.Envelope, f.Stop = r, r.Envelope, r.Stop
	case KindLinkKeys:
		r, err := linkkeysresult.Read(b)
		if err != nil {
			return refuse(err)
		}
		f.LinkKeys, f.Envelope, f.Refused = &r, &r.Envelope, r.Refused
		if err := stopOf(b, f); err != nil {
			return refuse(err)
		}
	case KindEnvelope:
		var e envelopeFile
		if err := json.Unmarshal(b, &e); err != nil {
			return refuse(err)
		}
		if err := e.Validate(); err != nil {
			return refuse(err)
		}
		f.Envelope, f.Stop, f.Refused = &e.Envelope, e.Stop, e.Refused
	}
	return f, nil
}

// notObject says why b, which is no JSON object, is no file loadproof reads.
func notObject(b []byte) error {
	const want = "every file loadproof reads is one JSON object"
	t := bytes.TrimLeft(b, " \t\r\n")
	var what string
	switch err := json.Unmarshal(b, new(any)); {
	case len(t) == 0:
		what = "is empty; " + want
	case err != nil:
		var se *json.SyntaxError
		if errors.As(err, &se) && se.Offset >= int64(len(b)) || strings.Contains(err.Error(), "unexpected end of JSON input") {
			what = fmt.Sprintf("is not valid JSON: it ends after %d bytes in the middle of a value (cut short while it was written or copied?); %s", len(b), want)
		} else {
			what = fmt.Sprintf("is not valid JSON (%v); %s", err, want)
		}
	case t[0] == 'n':
		what = "is JSON null; " + want
	default:
		what = fmt.Sprintf("is JSON but not an object (it starts with %q); %s", t[0], want)
	}
	return &keycastresult.NotResultsError{What: what}
}

// stopOf reads the stop event a result file carries beside its envelope.
func stopOf(b []byte, f *File) error {
	var s struct {
		Stop *result.StopEvent `json:"stop"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	f.Stop = s.Stop
	return nil
}

// envelopeFile is any harness's result file as far as a reader of the envelope needs it: the
// envelope at the top level, the stop event and the refusals.
type envelopeFile struct {
	result.Envelope
	Stop    *result.StopEvent `json:"stop"`
	Refused map[string]int64  `json:"refused"`
}

const exportRemedy = "give the result file it was drawn from (the client's --json or --output file, a Keycast run's results file), or a bundle's directory"

// textOpenings are the first lines of the text reports loadproof prints (report, compare, search,
// verify and the clients' summaries), by their start.
var textOpenings = []string{
	"Keycast Load Test Results", "Comparison", "Capacity evidence (", "TAMPERED", "PARTIAL",
	"connections: target=", "handshake-bench: duration_secs=", "request-bench: op=", "ddos: sources=",
	"combined:", "search: --vary", "compare:",
}

// csvHeaders are the header rows of the CSV exports (report --format csv), by their start.
var csvHeaders = []string{"url,scenario,method,", "command,stream,kind,", "harness,phase,kind,"}

// exportKind tells the exports loadproof writes but does not read back, by their first bytes:
// none of them holds a result (a text report, a CSV row and an .hgrm distribution hold figures
// drawn from it, an HTML page the page's own model), so there is nothing to read back that would
// merge, compare or verify. KindUnknown for anything else (JSON included).
func exportKind(b []byte) (Kind, string) {
	t := bytes.TrimLeft(bytes.TrimPrefix(b, []byte("\xef\xbb\xbf")), " \t\r\n")
	if len(t) == 0 || t[0] == '{' || t[0] == '[' {
		return KindUnknown, ""
	}
	head := t[:min(len(t), 512)]
	line, _, _ := bytes.Cut(head, []byte("\n"))
	line = bytes.TrimRight(line, "\r")
	low := strings.ToLower(string(head))
	switch {
	case strings.HasPrefix(low, "<!doctype html") || strings.HasPrefix(low, "<html"):
		return KindExportHTML, "an HTML page (report --format html, compare, search --html)"
	case strings.Join(strings.Fields(string(line)), " ") == "Value Percentile TotalCount 1/(1-Percentile)":
		return KindExportHGRM, "an HdrHistogram distribution (report --format hgrm)"
	case !utf8.Valid(head[:len(head)-trailingPartialRune(head)]) || bytes.IndexByte(head, 0) >= 0:
		return KindUnknown, ""
	}
	for _, h := range csvHeaders {
		if bytes.HasPrefix(line, []byte(h)) {
			return KindExportCSV, "a CSV export (report --format csv)"
		}
	}
	for _, o := range textOpenings {
		if bytes.HasPrefix(line, []byte(o)) {
			return KindExportText, "a text report (what report, compare or a client prints)"
		}
	}
	return KindUnknown, ""
}

// trailingPartialRune is how many bytes at the end of b start a rune that the cut at 512 bytes
// split (0 to 3), so a cut rune does not make text look binary.
func trailingPartialRune(b []byte) int {
	for n := 1; n <= 3 && n <= len(b); n++ {
		c := b[len(b)-n]
		if c&0xC0 != 0x80 { // a rune's first byte (or ASCII)
			if !utf8.FullRune(b[len(b)-n:]) {
				return n
			}
			return 0
		}
	}
	return 0
}
