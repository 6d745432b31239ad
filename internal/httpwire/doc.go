// Package httpwire is the hand-written HTTP/1.1 and JSON scanning shared by the Keycast load
// generator's fast client (internal/keycastload) and the Keycast server's fast path
// (internal/keycastserver).
//
// Both sides exist because net/http and encoding/json cost more per request than the work they
// frame: the generator's budget is a few microseconds of CPU per request, the server's
// get_public_key answer is about 7 µs. The measured A/B that justifies each piece is in
// docs/benchmarks.md ("Keycast load generator", "Keycast server", "Hand-written JSON scanning
// against encoding/json").
//
// What it holds:
//
//   - ReadResponse: one HTTP/1.1 response from a bufio.Reader, with interim (1xx) responses
//     skipped, Content-Length, chunked and close-delimited bodies, Connection: close and HTTP/1.0
//     keep-alive, and a bounded body.
//   - ParseRequestHead: a request head in the plain shape a fast path can answer on its own; it
//     reports ok=false for anything else, so that the caller hands the request to net/http.
//   - JSON scanning (json.go): white space, strings, validating skips of any value, plain strings
//     and integers, and readers over the members of an object and the elements of an array.
//     Callers decode their own shapes with them and fall back to encoding/json for anything the
//     scanners do not take.
//
// The rule throughout is "stricter than the library, never looser": whatever these parsers
// accept, net/http or encoding/json accepts with the same meaning, and whatever they are unsure
// of they refuse. Differential fuzz targets check it: FuzzReadResponse against
// http.ReadResponse, FuzzParseRequestHead against http.ReadRequest, FuzzSkipValue and
// FuzzPlainString against encoding/json. Seed corpora are in testdata/fuzz.
//
// The package imports no other package of this module, so servers and load drivers may both use
// it (internal/deps_test.go).
package httpwire
