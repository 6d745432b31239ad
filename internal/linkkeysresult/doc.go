// Package linkkeysresult owns the LinkKeys clients' result file: what `linkkeys-loadtest connections
// | handshake-bench | request-bench | ddos --json` writes, what worker processes hand their parent,
// and what `loadproof report` redraws the seed's lines from.
//
// A Result is the shared result.Envelope (format, command and flags, target, one machine record per
// process, segments, totals by outcome class, whole-run HDR histograms by latency kind, the timeline
// of interval snapshots with the server samples taken in them) plus the LinkKeys sections: connection
// attempts, the held connections, handshakes, requests, the server's own accounting and CPU figures.
// Merge combines the results of one run's segments exactly: the envelope through result.Envelope.Merge,
// the sections by adding their counts and merging their histograms.
//
// The outcome classes and latency kinds the clients record are named here (AttemptClasses,
// RequestClasses, Kind*), so a report can read them without importing the clients. The package also
// holds the few pieces of Rust formatting the seed's lines use (FormatRustDuration and friends),
// because a result's durations carry their Rust rendering. It is pure data: it runs no load and
// imports no client, so internal/report may use it (docs/architecture.md).
package linkkeysresult
