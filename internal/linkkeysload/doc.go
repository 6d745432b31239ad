// Package linkkeysload holds the LinkKeys load clients: connections (hold many established, mostly
// idle TLS connections), handshake-bench (TLS handshake rate), request-bench (request throughput over
// persistent connections, closed or open model, optionally pipelined), ddos (one attempt per distinct
// source address, checked against the server's own accounting) and the smoke run that drives all four
// against a freshly started server.
//
// Everything crosses a real socket: the clients read the server's info file, bind source addresses
// anywhere in 127.0.0.0/8 (IP_BIND_ADDRESS_NO_PORT, so the kernel picks the port at connect time),
// pin the server's certificate fingerprint and speak the wire protocol of package linkkeys. They never
// import the server.
//
// # Output
//
// Each command prints the seed's lines byte for byte (see output.go): the header line, progress lines,
// the DONE line with Rust's Debug rendering of the elapsed time (FormatRustDuration), the failure
// reasons map in Rust's Debug map form (FormatRustMap) and the NOTE paragraphs, which say the same as
// the seed's in our own words. Beyond the seed, failure reasons carry the errno or TLS cause
// ("tcp_connect_error:ECONNREFUSED", "tls_handshake_error_or_server_reject:EOF"), printed on an extra
// line, and every command can write a JSON Result with HDR latency histograms and the machine record.
//
// # Many processes
//
// A process may hold at most its open-file soft limit of sockets. A run that needs more (for example
// 200,000 held connections under a 20,000 limit) fans out to worker processes of the same binary
// (engine.FanOut). Each worker takes an engine.Segment of the run: a contiguous Range of the global
// attempt indexes (so attempt i still uses source address base + i mod client-ip-count, exactly as a
// single process would), a Share of the concurrency, and for the open model a Share of the rate with
// an evenly interleaved phase. Workers print machine-readable progress lines that the parent sums into
// the seed's progress lines, and write a Result that the parent merges exactly (Result.Merge: counts
// add, histograms merge bucket by bucket).
//
// The connections command holds every connection at the same time: each worker reports "ready" when
// its attempts are done and then blocks on a barrier (a Unix socket the parent serves); the parent
// starts the hold when the LAST worker is ready and releases all workers hold-secs later. A single
// process does the same with itself. This differs from the seed, where each connection sleeps
// hold-secs from its own handshake, so with a ramp longer than the hold the first connections close
// before the last ones open; here the whole count is held at once for hold-secs.
package linkkeysload
