// Package keycastserver is the Keycast reference server: an HTTP/1.1 JSON server compatible with
// the Keycast load-test tool (ours, and upstream's as documented), following the Dec-2025 Keycast
// server (docs/protocol-keycast.md, Server API and Data model) and adopting later behaviour where it
// is more correct. It exists so a load test has a real target on the same machine: real bcrypt,
// real BIP-340 signing, real SQLite or PostgreSQL, and the same load-shedding contract a production
// Keycast answers with (HTTP 503 admission_rejected), so a capacity plan can show shedding.
//
// Use it as net/http's Server is used:
//
//	cfg, err := keycastserver.ConfigFromEnv(os.Getenv) // every bad variable reported at once
//	srv, err := keycastserver.New(cfg, logger)
//	err = srv.Serve(ln)                                // until Shutdown
//	err = srv.ServeTLS(ln, keycastserver.TLSConfig(cert)) // or https (tls.go)
//
// Serve answers well-formed "POST /api/nostr HTTP/1.1" requests on a small per-connection loop
// (fastpath.go), because that path is what a generator measures and net/http's per-request cost
// would dominate it, and hands every other connection to net/http; the answers are identical either
// way. CPU-heavy work runs under an admit.Gate so overload becomes shedding rather than latency.
//
// The API, tenancy, handler cache, shedding and rate limits, connection limits, storage and every
// environment variable with its default and range are in docs/keycast-server.md.
package keycastserver
