// Package linkkeysserver is the LinkKeys reference TCP/TLS server: the wire
// protocol of package linkkeys behind the admission control of upstream's
// async TCP server, a real SQLite store, a snapshot cache, the METRICS line
// and a Prometheus endpoint. The `server` command (internal/cli) is a thin
// layer over it; tests and load clients start it on 127.0.0.1:0 with
// NewTestServer. The upstream behaviour it follows is described in
// docs/protocol-linkkeys.md; deliberate differences are listed in
// docs/upstream-differences.md.
//
// # Server
//
// Server follows net/http: set Config (zero values are the upstream defaults,
// see ConfigFromEnv for the TCP_*, PUBLIC_READ_* and
// DOMAIN_KEY_SNAPSHOT_TTL_SECONDS variables), TLSConfig, Keys and Logger,
// then call Serve(ln) with one or more listeners; Shutdown(ctx) drains and
// Close stops at once; Serve then returns ErrServerClosed. Metrics returns a
// Snapshot of every upstream counter and gauge (docs/protocol-linkkeys.md,
// Server metrics) plus the limiter and cache statistics.
//
// # Admission
//
// On the accept goroutine, without spawning anything for a refused socket:
// accepted_connections and open_connections are incremented; the connection
// cap (TCP_MAX_CONNECTIONS, counting every socket from accept to close) is
// checked first; then the handshake limiter (admit.Limiter: distinct-source
// window, per-source buckets in 16 shards, overflow bucket, global bucket
// last, no refunds) keyed by the peer address (/32, IPv6 /prefix). A refused
// socket is closed without any TLS byte and counted in shed_connection_limit
// or shed_handshake_{per_source,overflow,global}. An admitted one gets a
// goroutine that waits for one of TCP_HANDSHAKE_CONCURRENCY slots and runs
// the TLS handshake, both within TCP_HANDSHAKE_TIMEOUT_SECONDS, ending in
// handshake_timeouts, handshake_rejections or established.
//
// Upstream increments open_connections on the connection-cap shed path and
// never decrements it, so the gauge drifts up by one per shed connection.
// This server decrements it: open_connections is exactly the
// sockets open.
//
// Every accepted connection ends in exactly one outcome counter, so
//
//	accepted_connections = established_total + handshake_rejections + handshake_timeouts
//	                     + shed_connection_limit + shed_handshake_per_source
//	                     + shed_handshake_overflow + shed_handshake_global
//	                     + handshakes_in_progress (0 once the server is quiet)
//
// holds exactly (Snapshot.Pending is the difference). established_total, a
// counter, is appended to the METRICS line because established_connections
// is a gauge. Accept errors (EMFILE, …) are not accepts: they are logged and
// retried with a backoff. Shutdown and Close cut handshakes short; those
// count as handshake timeouts (Shutdown) or rejections (Close).
//
// # Message loop
//
// An active connection is served by one goroutine that reads a frame (the
// 4-byte prefix under TCP_IDLE_TIMEOUT_SECONDS, the body under
// TCP_IO_TIMEOUT_SECONDS; over 1 MiB closes the connection before any
// allocation), dispatches it in order and appends the encoded response to a
// write batch. The batch goes out in one TLS write when no further complete
// prefix is already buffered, or when min(TCP_MAX_INFLIGHT_FRAMES,
// TCP_WRITE_QUEUE_BOUND) responses are pending: frames read but not yet
// answered on the wire never exceed TCP_MAX_INFLIGHT_FRAMES, and encoded
// responses held never exceed TCP_WRITE_QUEUE_BOUND. While a write blocks
// (bounded by the I/O timeout) nothing more is read, so a client that does
// not read its responses meets TCP backpressure, never an unbounded queue.
// Upstream runs three tasks per connection (reader, dispatcher, writer) with
// channels of those capacities; inline dispatch gives the same bounds and
// order without two goroutine hand-offs per request. Deadlines are renewed
// lazily (at most once per slack period) rather than per frame.
//
// frame_buffer_bytes counts a frame's announced length from the accepted
// prefix until the body is handed to dispatch (or the read fails), so it is
// 0 on idle connections; a frame whose body arrived with its prefix is
// dispatched from the read buffer at once and not counted. The counted bytes
// are a server-wide budget (TCP_MAX_INFLIGHT_FRAME_BYTES): a frame that must
// wait for its body reserves its length before any buffer is allocated, and
// one that does not fit closes its connection (the newest frame is shed).
// Such a body must arrive within TCP_IO_TIMEOUT_SECONDS of its prefix and at
// no less than TCP_MIN_FRAME_BODY_BYTES_PER_SECOND in each
// TCP_FRAME_BODY_GRACE_SECONDS window, so stalled frames give their share of
// the budget back within two windows. An answer over 1 MiB is never sent: the
// answers before it go out and the connection closes. Read buffers (4 KiB,
// pooled) are held only while bytes of a frame are buffered, write buffers
// only while responses are pending; larger bodies get a buffer of exactly
// their length.
//
// # Parking idle connections
//
// An established connection that has had nothing to read for ParkAfter
// (default 1 s; right after the handshake, at once) is parked: its goroutine
// exits and its socket is registered, EPOLLONESHOT and level-triggered, in an
// epoll set of the server's own, next to Go's netpoller registration of the
// same fd. The decision follows a read that timed out (a zero-deadline read
// right after the handshake): Go's tls.Conn hands out buffered plaintext and
// whole buffered records before touching the socket, so a timed-out read
// proves it holds neither, and the socket becoming readable is then a
// complete wake-up signal. One poller goroutine waits in epoll_wait and
// starts a serving goroutine for each socket that becomes readable (or hung
// up). Idle timeouts of parked connections are enforced by a hashed timer
// wheel with 100 ms ticks (closed between IdleTimeout and IdleTimeout+100 ms).
// A parked connection holds its struct, the tls.Conn and the socket: no
// goroutine, no buffers. A negative ParkAfter (or a platform without epoll)
// keeps one goroutine per connection.
//
// # Dispatch
//
// Depth pre-scan of the frame (linkkeys.CheckDepth, 64), envelope decode
// (panics become "Malformed request"), pre-scan of the payload, the API-key
// attempt limiter when auth is present (10 per source, 2/s; 100 global,
// 20/s; status 4), then Ops/healthcheck, Ops/readiness, Hello/hello,
// Handshake/handshake, DomainKeys/get-domain-keys and
// DomainKeys/get-revocations; other pairs get status 2 with the upstream
// message. The public-read limiter gates the DomainKeys ops (status 7,
// "Rate limited. Try again in N seconds"). Fixed answers (health, readiness,
// the default greeting) are encoded once.
//
// # Snapshot cache and store
//
// get-domain-keys and get-revocations (without since) are served from Cache,
// which stores the whole encoded response frame, so a hit is one map lookup
// and a copy into the write batch. Cache is single-flight with a TTL
// (DOMAIN_KEY_SNAPSHOT_TTL_SECONDS), a negative TTL clamped below it, entry
// and byte bounds, LRU eviction, never-cached loader errors, and statistics.
// Store is the SQLite file (modernc.org/sqlite, WAL, busy_timeout 5000,
// embedded versioned migrations recorded in schema_migrations) with the
// domain_keys and issued_revocations tables (see migrations/). Writes through
// a Store invalidate the cache of the Server using it (ChangeNotifier).
// PrepareServerKey stores the server's own Ed25519 TLS key as an active
// signing key: encrypted (Argon2id + AES-256-GCM, LinkKeys' v2 blob) under
// DOMAIN_KEY_PASSPHRASE and reused on later starts when that is set;
// otherwise with a NULL private key (kept in memory only) and retired on the
// next start.
//
// # Metrics
//
// Server.Metrics returns a Snapshot: the METRICS line as a
// linkkeys.MetricsLine (the upstream fields byte for byte in their order,
// elapsed_secs formatted like serde_json, then established_total,
// parked_connections, rate_limited_responses and one closed_* counter per
// reason an established connection ended, so that established_total =
// established_connections + the closed_* counters) plus the limiter and cache
// statistics. With Config.SourcePrefixes (TCP_SOURCE_PREFIXES) the snapshot
// also carries the accounting of each named source range
// (linkkeys.SourceCounters, source_<name>_<counter> at the end of the line):
// the accept loop finds a connection's range once, the connection keeps its
// index in a byte, and each counter is bumped next to its global one (see
// sources.go). PrometheusExporter exposes the same fields, named by the
// line's field tables, plus the limiter and cache statistics as
// linkkeys_server_* series. MemoryReleaser returns freed heap memory to the
// OS after bursts and drops the mappings of the binary's read-only pages at
// start and when idle (see docs/benchmarks.md for what each saves).
//
// # Several processes (--processes N)
//
// StartSupervisor starts N children of the same binary that bind one port
// with SO_REUSEPORT (the parent first reserves the port with a bound but
// never listening SO_REUSEPORT socket, which takes no connections) and gives
// each the key seed on stdin; RunChild is a child's body. The parent sums the
// children's METRICS lines (SumSnapshots, source ranges included), writes the info file and forwards
// SIGINT and SIGTERM. Each child runs Config.Share(n, i): the global and
// overflow buckets of both limiters are split exactly, TCP_MAX_CONNECTIONS
// and TCP_HANDSHAKE_CONCURRENCY as whole numbers summing to the total;
// per-source budgets and the distinct-source threshold are divided
// approximately (a source's connections land on processes by 4-tuple hash;
// see admit.LimiterConfig.Share for the error bound). With FillSequential
// (--process-fill sequential) the children start in order and the
// supervisor steers new connections to one child at a time with a
// classic-BPF SO_REUSEPORT program (SteerReusePort), moving on as each
// child's Occupancy reports it full; each child then runs
// Config.ShareSequential (rate budgets whole, caps divided).
package linkkeysserver
