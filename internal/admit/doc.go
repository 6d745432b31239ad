// Package admit is the admission control shared by both reference servers:
// token buckets, the three-layer distinct-source limiter, source keys and
// bounded-wait concurrency gates.
//
// The limiter follows LinkKeys' public-read limiter exactly
// (docs/protocol-linkkeys.md, The three-layer limiter). A check passes three layers, in order, and all must
// pass:
//
//  1. Admission into a tumbling distinct-source window. The window holds at
//     most DistinctSourceThreshold compact source ids (the first 8 bytes of
//     the SourceKey read little-endian). A source already in the window is
//     Known, a new one is admitted while there is room, and once the window is
//     full every further new source is in protection mode (Overflow) until the
//     window rotates. The window rotates lazily on the first check at least
//     Window after it started.
//  2. Known and newly admitted sources draw on their own per-source bucket,
//     held in shards (shard = compact id & (shards-1)), each bounded to
//     max(16, ceil(threshold/shards)) buckets. A new source at a full shard
//     first drops every bucket that would already be full again, then the
//     least recently used ones. The per-source map is not cleared when the
//     window rotates. Overflow sources draw on one shared overflow bucket and
//     allocate no per-source state.
//  3. The global bucket, always last. It is not touched when an earlier layer
//     fails, and a token already taken by an earlier layer is not refunded
//     when the global bucket fails.
//
// Every bucket starts full, refills continuously, and on failure gives a
// whole-second retry hint of at least one second.
//
// Time comes from a Clock, so tests drive a ManualClock and never sleep.
//
// The package imports no protocol package; the LinkKeys server feeds it peer
// addresses per accepted connection (handshake limiter) and per request
// (public-read limiter), and the Keycast server uses Gate to bound CPU-heavy
// work.
package admit
