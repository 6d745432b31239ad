// Package keycastserver is the Keycast reference server: an HTTP/1.1 JSON server compatible with
// the Keycast load-test tool (ours, and upstream's as documented), following the Dec-2025 Keycast
// server (docs/protocol-keycast.md, Server API and Data model) and adopting later behaviour where it
// is more correct.
//
// # API
//
//	POST /api/auth/register        Origin required; bcrypt; keys generated or from nsec; sets the
//	                               keycast_session cookie (a user-signed UCAN)
//	POST /api/auth/login           email + password → keycast_session
//	POST /api/oauth/authorize      session cookie → single-use code (10 min), PKCE S256 or plain;
//	                               an access token is never accepted as a session
//	POST /api/oauth/token          code (+ code_verifier) → server-signed access token with
//	                               bunker_pubkey; the bunker key is HKDF-derived
//	POST /api/nostr                get_public_key, sign_event, nip44_encrypt/decrypt,
//	                               nip04_encrypt/decrypt; Keycast's policy rules (all must allow)
//	POST /api/user/sessions/revoke {"bunker_pubkey"}: a session revokes one of the user's
//	                               authorizations, an access token only its own
//	GET  /api/policies             the global policies
//	GET  /api/metrics              Prometheus text: Keycast's 19 series in Keycast's order, then
//	                               keycast_http_rpc_operation_duration_seconds{method,outcome}
//	                               and the admission series
//	GET  /health, /healthz/startup 200, empty
//	GET  /healthz/ready            200 when the database answers, else 503
//
// Tenancy: the tenant is the Host header without its port, created on first sight and cached
// (no database work per request once known). Unlike upstream, creation stops once the tenants
// table holds KEYCAST_MAX_TENANTS rows (default 100): past that an unknown Host gets 400
// "Unknown tenant", so made-up Host headers cannot grow the database. /api/nostr does not check the token's tenant, as
// in the Dec-2025 server, so tokens written by the load tool's DB-mode setup work from any
// Host. CORS: /api/nostr, /api/oauth/* and /api/metrics allow any origin without
// credentials; register, login and revoke allow ALLOWED_ORIGINS and http://localhost:* with
// credentials.
//
// # Handler cache
//
// /api/nostr looks the bearer token up by SHA-256 in an LRU (github.com/hashicorp/golang-lru/v2,
// HANDLER_CACHE_SIZE entries, default 1,000,000) with a 1-hour idle expiry. An entry holds the
// decrypted user key as a ready keycast.Signer, the authorization id, its expires_at and
// revoked state, the policy rules and the precomputed get_public_key answer, so a hit touches
// no database. Unlike upstream, a hit is refused with 401 when the token's exp or the
// authorization's expires_at has passed, and revoking an authorization evicts its entries at
// once in this process (they share one state object; a tombstone stops a concurrent miss from
// re-caching it). Hits, misses and size feed keycast_http_rpc_cache_*.
//
// # Load shedding and rate limits
//
// CPU-heavy work (sign_event, NIP-44 and NIP-04, bcrypt in register and login, token
// verification on a cache miss and in OAuth, key derivation in the token exchange) runs under
// an admit.Gate with KEYCAST_CPU_SLOTS slots (default GOMAXPROCS) and a bounded wait queue of
// KEYCAST_CPU_QUEUE requests (default 64 per slot; 0 = never wait). A request that finds the
// queue full, or waits longer than KEYCAST_QUEUE_TIMEOUT_MS (default 250), is shed with
//
//	HTTP 503, Retry-After: 1, {"error":"server at capacity, retry shortly","code":"admission_rejected"}
//
// and counted in keycast_expensive_resource_rejections_total{resource="cpu",outcome}. An
// optional per-authorization token bucket (KEYCAST_RPC_RATE_PER_SECOND, KEYCAST_RPC_BURST;
// off by default, as upstream) answers HTTP 429 with Retry-After and
// {"error":"…","code":"rate_limited"}. Neither is ever a 500: database trouble on the RPC path
// is 503 {"error":"Database temporarily unavailable"} (no code), the 8-second handler budget
// ends in 504, and bugs are 500.
//
// # Connections
//
// Open client connections are capped at KEYCAST_MAX_CONNECTIONS (default 10,000, or half the
// open-file limit when that is less); past the cap a new connection is answered at once with the
// shedding contract above and closed, and counted in keycast_http_connections_shed_total. On
// both paths a request head must arrive within KEYCAST_HEADER_TIMEOUT_MS of its first byte (a
// connection's first head, of the accept) and its body within KEYCAST_BODY_TIMEOUT_MS after it;
// idle keep-alive connections close after 2 minutes. When accept fails for lack
// of file descriptors, a descriptor kept in reserve lets the server accept and shed the waiting
// connection, and the trouble is logged once per 10 seconds. A request with both Content-Length
// and Transfer-Encoding, or a repeated Content-Length, is answered 400 and its connection closed
// (framing.go), so nothing behind it is served.
//
// # Storage and keys
//
// internal/keycaststore: SQLite (default <data-dir>/keycast.sqlite3) or PostgreSQL when
// DATABASE_URL is postgres:// or postgresql://. User secret keys are sealed with AES-256-GCM
// under MASTER_KEY_PATH (default <data-dir>/master.key, created 0600). Access tokens are signed
// by SERVER_NSEC (hex or nsec1…); when unset a key is generated once and kept in
// <data-dir>/server.nsec, so tokens survive restarts.
//
// # Environment
//
//	PORT                         port of the default address 127.0.0.1:PORT
//	DATABASE_URL                 see above
//	SERVER_NSEC                  see above
//	MASTER_KEY_PATH              see above
//	ALLOWED_ORIGINS              comma-separated origins for register/login CORS
//	HANDLER_CACHE_SIZE           handler cache entries (default 1000000)
//	TOKEN_EXPIRY_SECONDS         access and session token lifetime (default 86400)
//	BUNKER_RELAYS                comma-separated relays of bunker_url
//	HTTP_BODY_LIMIT              request body limit in bytes (default 65536)
//	KEYCAST_CPU_SLOTS            see above
//	KEYCAST_CPU_QUEUE            see above
//	KEYCAST_QUEUE_TIMEOUT_MS     see above
//	KEYCAST_RPC_RATE_PER_SECOND  see above
//	KEYCAST_RPC_BURST            see above
//	KEYCAST_BCRYPT_COST          bcrypt cost 4..31 (default 12, Keycast's DEFAULT_COST)
//	KEYCAST_HEADER_TIMEOUT_MS    a request head must arrive within this of its first byte,
//	                             100..600000 (default 10000), fast path and net/http alike
//	KEYCAST_BODY_TIMEOUT_MS      a request body must arrive within this of its head,
//	                             100..600000 (default 30000)
//	KEYCAST_MAX_CONNECTIONS      open client connections, 1..1000000 (default 10000, or half
//	                             the open-file limit when less); past it 503 admission_rejected
//	KEYCAST_MAX_TENANTS          tenants created from Host, 0..1000000 (default 100; 0 = none)
//	KEYCAST_FAST_PATH            on (default) or off: answer POST /api/nostr with the HTTP/1.1
//	                             fast path or send everything through net/http
//
// ConfigFromEnv reads them all and reports every bad value at once, naming the variable.
//
// # Performance
//
// Serve answers well-formed "POST /api/nostr HTTP/1.1" requests with a small per-connection
// loop (fastpath.go) and hands any other connection to net/http; answers are identical either
// way. A cache hit allocates nothing. Figures and the method are in docs/benchmarks.md
// ("Keycast server"); bench/keycast-server-rpc.sh measures them with wrk.
package keycastserver
