// Package report draws reports from Keycast results files alone: the upstream tool's text, CSV and
// comparison layouts byte for byte (docs/protocol-keycast.md, report), pretty JSON, and, after the upstream
// text, a block with loadproof's additions (p99.9 and p99.99, rate-limited and intentionally shed
// requests, open-model figures, stop events, failure causes, server-metric deltas) when the file
// carries them. Files in the upstream tool's schema carry none, so their report is exactly the
// documented upstream layout.
//
// The LinkKeys clients' lines live here too (linkkeys.go): the seed's header, DONE and accounting
// lines, which the clients print while they run and LinkKeysText redraws from a result file
// (package linkkeysresult) alone, merged over segments when there are several; a combined result's
// streams are drawn with their survival and accounting (linkkeys_combined.go). Capacity evidence
// files of either harness are drawn as text or CSV from the file alone (evidence.go).
//
// Numbers are formatted as Rust's `{:.1}` formats an f64: round half to even on the exact binary
// value (as Go's strconv), and "inf", "-inf", "NaN" for the non-finite values a zero baseline gives.
//
// HTML and HGRM draw any harness's result files (anything carrying the loadproof.result/v2
// envelope) and capacity evidence: one self-contained page with uPlot, the page's script and the
// data inline (assets/), or HdrHistogram's percentile-distribution text. The page's data is computed
// here from the files alone: per-interval percentiles from each interval's HDR histogram, rates,
// capacity phases on one time axis. LiveFeed makes the same page's rows one interval at a time for
// the live dashboard.
//
// Open (open.go) is the one door by which loadproof reads a file it is given: a bounded read, the
// kind told once (Sniff; the text, CSV, HTML and .hgrm exports, which are not read back, are named
// as such), and the file parsed into the one model of its kind. Every command that reads a result
// file, a bundle or a search file goes through it.
package report
