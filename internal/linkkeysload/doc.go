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
// # The engine
//
// Every command's load runs through engine.Execute with a thin driver that makes one operation and
// classifies it: a connection attempt (connections' ramp, ddos's sources as a count-bounded run,
// handshake-bench's loops as a duration-bounded run; attempts.go) or one request (request-bench's
// timed phase, in the closed or open model, pipelined or not; request.go). The outcome classes are
// success plus the seed's failure labels, the causes the detailed reasons. The engine owns the
// workers, the bounds, the progress hook behind the seed's progress lines, the interval snapshots
// (one a second) and the server samples taken in them (samples.go). What stays outside it: request-
// bench's setup, which opens its connections one after another and stops at the first failure as the
// seed does, and connections' hold, which holds what the ramp established.
//
// # Combined runs
//
// Combined (combined.go) runs the four kinds of load at once, each stream a scenario of one engine
// run (engine.ExecuteScenarios) made from its command's workload, with its own driver, source
// range, classes and histograms: a held population (connections' ramp, held until the others end,
// its survival read from the sockets' TCP state), a handshake stream, a request stream and ddos
// waves at offsets. The engine starts each at its offset and gives them one interval clock, one
// server sampler and one stop. Their results merge into one Result whose envelope prefixes every
// figure with the stream's name, so a fanned-out combined run merges exactly like the others.
//
// # Output
//
// Each command prints the seed's lines byte for byte, drawn by internal/report (output.go hands it
// each command's parameters): the header line, progress lines, the DONE line with Rust's Debug
// rendering of the elapsed time, the failure reasons map in Rust's Debug map form and the NOTE
// paragraphs, which say the same as the seed's in our own words. Beyond the seed, failure reasons
// carry the errno or TLS cause ("tcp_connect_error:ECONNREFUSED",
// "tls_handshake_error_or_server_reject:EOF"), printed on an extra line, and every command can write
// a JSON Result (package linkkeysresult: the shared result envelope with HDR latency histograms,
// interval snapshots and machine records, plus the LinkKeys sections).
//
// # Many processes
//
// A process may hold at most its open-file soft limit of sockets. A run that needs more (for example
// 200,000 held connections under a 20,000 limit) fans out to worker processes of the same binary
// (engine.FanOut). Each worker takes an engine.Segment of the run: a contiguous Range of the global
// attempt indexes (so attempt i still uses source address base + i mod client-ip-count, exactly as a
// single process would), a Share of the concurrency, and for the open model a Share of the rate with
// an evenly interleaved phase. Workers print machine-readable progress lines that the parent sums into
// the seed's progress lines, and write a Result that the parent merges exactly (linkkeysresult.Merge:
// counts add, histograms merge bucket by bucket, intervals merge by index).
//
// The connections command holds every connection at the same time: each worker reports "ready" when
// its attempts are done and then blocks on a barrier (a Unix socket the parent serves); the parent
// starts the hold when the LAST worker is ready and releases all workers hold-secs later. A single
// process does the same with itself. This differs from the seed, where each connection sleeps
// hold-secs from its own handshake, so with a ramp longer than the hold the first connections close
// before the last ones open; here the whole count is held at once for hold-secs.
package linkkeysload
