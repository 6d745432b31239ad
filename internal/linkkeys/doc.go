// Package linkkeys implements the LinkKeys TCP wire protocol: length-prefixed
// frames over TLS carrying CSIL-RPC v1 envelopes whose payloads are CBOR maps.
// It is shared by the reference server (internal/linkkeysserver) and every
// load client (internal/linkkeysload). This comment is the protocol
// specification, in our own words; docs/protocol-linkkeys.md has the
// tables, the byte vectors and the load-test files around it.
//
// # Transport stack
//
// From the bottom up: TCP (TCP_NODELAY, no keep-alive, no application ping),
// TLS 1.2 or 1.3 with a self-signed Ed25519 certificate and no ALPN, frames,
// one CSIL-RPC envelope per frame, and inside the envelope a CBOR payload
// wrapped as a tag-24 ("encoded CBOR data item") byte string.
//
// # Frames
//
// A frame is a 4-byte unsigned big-endian length followed by exactly that many
// body bytes; the length does not count itself. [MaxFrameSize] (1 MiB) is the
// largest body either side accepts: exactly 1 MiB is allowed, one byte more is
// rejected right after the prefix is read and before any buffer is allocated
// ([ReadFrame], [FrameTooLargeError]). The server answers an oversized frame
// by closing the connection without a response. A zero-length frame is valid
// framing; its empty body then fails envelope decoding (status 1).
//
// A connection carries any number of request/response pairs. Clients may
// pipeline; the server answers strictly in request order and never echoes
// the request id, so responses are matched to requests by position.
//
// # Envelopes
//
// Both envelopes are one CBOR map with text keys, encoded deterministically
// (RFC 8949 section 4.2.1, core deterministic encoding: keys sorted by their encoded
// bytes, which for text keys means shorter keys first, then bytewise; all
// lengths and integers in their shortest form). Decoders look keys up by
// name, accept any key order, ignore unknown keys and reject trailing bytes
// after the map.
//
// Request (encoded key order v, id, op, auth, payload, service):
//
//	v        uint              required, must be 1
//	service  text              required, e.g. "DomainKeys"
//	op       text              required, e.g. "get-domain-keys"
//	payload  tag 24(bytes)     required, the CBOR of the op's request type
//	id       uint              optional correlation id; the server ignores it
//	auth     text              optional API key "<user-id>.<secret>"
//
// Response (encoded key order v, id, error, status, payload, variant):
//
//	v        uint              always 1
//	status   uint              transport status, see [Status]
//	payload  tag 24(bytes)     the op's response; an empty byte string on error
//	error    text              present on error: a human-readable message
//	variant  text              optional output-arm name; the reference server omits it
//	id       uint              optional; the reference server never sends it
//
// A version other than 1 is a decode failure, reported by the server as
// status 1 (MalformedEnvelope), not 5. Application errors travel as transport
// statuses: unknown service/op is 2 ("Unknown service/operation: S/O"),
// authentication failures 4, internal errors 6 and rate limiting 7
// ("Rate limited. Try again in N seconds"). Codes 64 and above are host
// extensions.
//
// Worked example: the request DomainKeys/get-domain-keys with payload {}
// (a0) is the 54-byte envelope
//
//	a4 6176 01 626f70 6f 6765742d646f6d61696e2d6b657973
//	   677061796c6f6164 d818 41 a0 67736572766963 65 6a 446f6d61696e4b657973
//
// sent on the wire after the prefix 00000036.
//
// # Input checks before dispatch
//
// Before decoding, the server runs [CheckDepth] over the raw frame and again
// over the inner payload: a single linear scan, not a parser, that rejects
// nesting of arrays and maps deeper than [MaxDepth] (64), indefinite-length
// items, reserved additional-information values 28 to 30, a bare break byte,
// truncated heads, string lengths running past the end of the input and
// array or map counts that cannot fit in the remaining bytes. Empty input
// passes. Unlike the upstream scan, a tag head here does not take a slot of
// its enclosing container (its content does), and a tag with no content is
// rejected as truncated; tags do not add depth.
//
// # Payloads
//
// Payloads are CBOR maps with text keys in the same deterministic order.
// Optional fields are omitted when absent, with one historic exception: the
// load test's Hello request is sent as {"name": null}. Decoders ignore
// unknown keys so that newer peers stay compatible. [EncodePayload] and
// [DecodePayload] use fxamacker/cbor with these rules; the envelope hot paths
// are hand-written and tested byte for byte against it.
//
// # TLS and pinning
//
// The server presents a self-signed certificate whose subject CN and single
// DNS SAN are the domain and whose key is Ed25519 ([SelfSignedCert]). There
// is no CA: clients trust the server by pinning the certificate key's
// fingerprint, the lowercase hex SHA-256 of the 32 raw public-key bytes
// ([Fingerprint]). A client checks the leaf's validity window, that its key
// is Ed25519 and that its fingerprint is pinned; it does not check the server
// name, although it sends the domain as SNI ([ClientTLSConfig]).
//
// # Info file
//
// The load-test server writes {"port", "domain", "fingerprint", "pid"} as
// two-space indented JSON in that key order once it listens ([WriteInfo]);
// clients read it strictly ([ReadInfo]) and connect to 127.0.0.1:port,
// pinning the fingerprint and sending the domain as SNI.
//
// # Metrics line
//
// The load-test server prints its counters as "METRICS " followed by compact
// JSON: label, elapsed_secs, then thirteen counters and gauges in a fixed
// order, then process_rss_bytes (a whole number or null). Servers may append
// fields after process_rss_bytes; ours appends established_total,
// parked_connections, rate_limited_responses and the closed_* counters
// (docs/upstream-differences.md lists them). [MetricsLine] is the one type for
// a reading: the server fills it, [AppendMetricsLine] writes it,
// [ParseMetricsLine] reads ours and upstream's, and one field table
// ([MetricsFields]) fixes the order, the Prometheus names and the sums of
// several processes ([SumMetricsLines]).
package linkkeys
