// Package keycastload is the Keycast load tool's engine: `setup` (test users over HTTP or straight
// into the server's store), `run` (closed and open workload models against POST /api/nostr) and the
// server-metrics snapshots around a run. The `capacity` command and the CLI drive it through Run.
//
// # The clients
//
// The generator must cost far less CPU per request than the server it measures, so by default
// (`--http-client fast`) it does not use net/http on the hot path. Each simulated user has its own
// small HTTP/1.1 client (as upstream: one client, one cookie jar and one connection pool per user,
// so a load balancer's affinity cookie is kept per user): keep-alive connections over raw TCP (or
// TLS for https targets), the request head precomputed per user (request line, Host,
// Authorization, Content-Type), the user's cookies applied as one Cookie header rebuilt only when
// a Set-Cookie arrives, and responses read by internal/httpwire (interim 1xx responses skipped,
// Content-Length, chunked and close-delimited bodies up to a bound). The body is judged without
// decoding it: success is a 2xx status and a JSON object with no top-level "error" member (a null
// "error" counts as absent, as serde reads it); a body the single pass is unsure of is judged by
// encoding/json.
//
// `--http-client std` runs the same load over net/http: one http.Client whose keep-alive pool
// holds as many connections as there are workers, HTTP/1.1, the same head fields, the same
// per-user cookies and bodies, the same classification from status and body. It is the escape
// hatch when the fast client is in doubt, and the reference it is tested against
// (TestResponseParsingBothClients). The results record which one ran (metadata.http_client).
//
// A request is retried at most once, on a fresh connection, and only when it went out on a reused
// connection and not a single byte of it was written: the server had closed the idle connection
// (seen before writing: a connection idle for a millisecond or more is checked with one
// non-blocking read), or the first write failed outright. Once any byte is on the wire the server
// may have acted on the request, so its failure is counted, as net/http does for a POST. A server
// that closes a connection within a millisecond of answering on it, without Connection: close,
// therefore fails the next request sent on it at once; net/http has the same race.
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
// The loop is internal/engine's: this package's driver sends one request and classifies it. Samples
// go to the engine's per-shard HDR histograms (microseconds, 1 µs to 10 min) under uncontended
// per-shard locks; a collector swaps the shards out every second into an interval snapshot (with a
// sample of the server's /api/metrics), so no sample is ever dropped (the
// upstream tool's try_lock drops some), the cumulative figures are exact, and the last seconds form
// the sliding window that live stop conditions judge. The run clock starts when the workers start
// and stops when the last worker finishes, so the reported duration excludes the trailing wait and
// the metrics fetch that upstream includes.
//
// Closed model (default): Concurrency workers, worker w starting RampUp·w/(Concurrency−1) after the
// start, each sending its next request when the previous one ends. `--duration 0 --requests N` runs
// until exactly N requests are done (upstream exits at once): request numbers come from
// an atomic ticket counter that refuses tickets beyond N, so there is no overshoot.
//
// Open model (Rate > 0): sends are scheduled at a constant arrival rate (ramping linearly from
// RateFrom over RampUp) by engine.Schedule, and up to Concurrency requests are in flight. Latency is
// measured from each request's intended send time (coordinated omission corrected; the summary
// percentiles) and from its actual send (uncorrected, in open_model). A send is late when it starts
// more than LateThreshold (1 ms) after its intended time; a scheduled send that never started
// because the run ended is dropped.
//
// User selection is upstream's (docs/protocol-keycast.md, User selection): request number r (plus
// the seed) picks user 0 in warm-cache, r mod N in cold-start, and in mixed 80% from the hot first
// tenth and 20% rotating through the rest.
//
// # Setup
//
// HTTP mode runs register → authorize (PKCE S256, client "loadtest", scope policy:social) → token per
// user, at most Concurrency at once, with emails lt{unix_ts}-{6 random}-{i}@test.local (upstream has no
// random part, so two setups in one second collide) and 32-character random passwords, as upstream. DB mode writes each user straight into the server's SQLite or PostgreSQL
// store through internal/keycaststore: users, personal_keys sealed with the server's master key, and
// oauth_authorizations; each user's access token is a UCAN the user signs for itself with
// bunker_pubkey, as upstream's DB mode mints it. The reference server (and the Dec-2025 Keycast
// server) accepts a token whose issuer is its audience on /api/nostr, so DB-mode users can sign;
// later Keycast servers that refuse user-signed tokens need HTTP mode.
//
// # Upstream quirks and what this package does
//
// The quirks are those of docs/protocol-keycast.md, Quirks; docs/upstream-differences.md has every
// decision.
//
//   - warm-cache uses user 0, as upstream's code (not its README) does: kept.
//   - `--duration 0 --requests N` exits at once upstream: here it runs exactly N requests.
//   - DB mode ignores --master-key-path and writes no personal_keys: here it uses the key
//     file (refusing to run without it) and writes the sealed key, so DB-mode users can sign. Its
//     emails carry a run id (loadtest-{ts}-{6 random}-{i}@test.local) so a second run does not
//     collide with the first on (tenant, email), and its bunker key is derived from the user key
//     and the connection secret as the token endpoint derives it, not drawn at random.
//   - No session cookie from later servers, and http:// targets other than localhost refused at
//     the token step, are server behaviour: setup reports them by cause ("register: No session
//     token in response", "token: HTTP 400").
//   - A non-metrics page gives no snapshot and a warning instead of zeros.
//   - No latency sample is dropped.
//   - The duration excludes the trailing wait and the metrics fetch.
//
// Beyond upstream: setup sends a registration step again when it is shed (503
// admission_rejected) or rate-limited (429), after Retry-After with jitter, up to 30 times, where
// upstream drops the user; concurrent registrations pass their session cookie explicitly rather than
// sharing one cookie store; the run's register method classifies a failed flow by the failing
// step's real status (a shed 503 stays intentional) where upstream records a synthetic 500.
package keycastload
