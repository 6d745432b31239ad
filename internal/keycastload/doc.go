// Package keycastload is the Keycast load tool's engine: `setup` (test users over HTTP or straight
// into the server's store), `run` (closed and open workload models against POST /api/nostr) and the
// server-metrics snapshots around a run. The `capacity` command and the CLI drive it through Run.
//
// # The client
//
// The generator must cost far less CPU per request than the server it measures, so it does not use
// net/http on the hot path. Each simulated user has its own small HTTP/1.1 client (as upstream: one
// client, one cookie jar and one connection pool per user, so a load balancer's affinity cookie is
// kept per user): keep-alive connections over raw TCP (or TLS for https targets), the request bytes
// precomputed per user and method (request line, Host, Authorization, Content-Type), the user's
// cookies applied as one Cookie header rebuilt only when a Set-Cookie arrives, and a response parser
// that reads the status line, Content-Length or chunked bodies up to a bound, and judges the JSON
// body without decoding it: success is a 2xx status and a well-formed JSON object with no top-level
// "error" member (a null "error" counts as absent, as serde reads it).
//
// A request written on a reused keep-alive connection that the server had already closed (nothing
// written, or end of stream before the first response byte) is sent once more on a fresh connection,
// as hyper's pool does; every other failure is counted.
//
// # Classification
//
// Every request ends in exactly one bucket: success; 401/403 auth; 429 rate-limited; 503 whose JSON
// body's "code" (or, failing that, "error") is "admission_rejected" intentional shedding; any other
// 5xx server; any other 4xx client; no status at all network; anything else (a 2xx with an error
// body or an unparseable body, a 1xx or 3xx) other. FailureCauses counts failures by a finer cause
// ("http_503_admission_rejected", "rpc_error", "network_econnrefused", ...).
//
// # Measurement
//
// Samples go to per-shard HDR histograms (microseconds, 1 µs to 10 min) under uncontended
// per-shard locks; a collector swaps the shards out every second, so no sample is ever dropped (the
// upstream tool's try_lock drops some), the cumulative figures are exact, and the last seconds form
// the sliding window that live stop conditions judge. The run clock starts when the workers start
// and stops when the last worker finishes, so the reported duration excludes the trailing wait and
// the metrics fetch that upstream includes (quirk §7.9).
//
// Closed model (default): Concurrency workers, worker w starting RampUp·w/(Concurrency−1) after the
// start, each sending its next request when the previous one ends. `--duration 0 --requests N` runs
// until exactly N requests are done (upstream exits at once, quirk §7.3): request numbers come from
// an atomic ticket counter that refuses tickets beyond N, so there is no overshoot.
//
// Open model (Rate > 0): sends are scheduled at a constant arrival rate (ramping linearly from
// RateFrom over RampUp) by engine.Schedule, and up to Concurrency requests are in flight. Latency is
// measured from each request's intended send time (coordinated omission corrected; the summary
// percentiles) and from its actual send (uncorrected, in open_model). A send is late when it starts
// more than LateThreshold (1 ms) after its intended time; a scheduled send that never started
// because the run ended is dropped.
//
// User selection is upstream's (§1.4): request number r (plus the seed) picks user 0 in warm-cache,
// r mod N in cold-start, and in mixed 80% from the hot first tenth and 20% rotating through the rest.
package keycastload
