// Package keycast is the Keycast API contract shared by the reference server
// (internal/keycastserver) and the load tool (internal/keycastload,
// internal/capacity, internal/report).
//
// It holds everything both sides must agree on byte for byte:
//
//   - keys: secp256k1 secret keys and x-only public keys, hex and bech32
//     (nsec/npub) forms;
//   - BIP-340 Schnorr signatures (schnorr.go), with a [Signer] that caches the
//     parsed key so the hot path does one scalar base multiplication per
//     signature;
//   - NIP-01 events: the canonical id serialization, signing and verification;
//   - NIP-44 v2 and NIP-04 encryption;
//   - UCAN access and session tokens exactly as Keycast mints them
//     (header {"alg":"SchnorrSecp256k1","typ":"JWT","ucv":"0.9.0-canary"},
//     DAG-JSON payload with sorted keys, BIP-340 over SHA-256 of the signed
//     data), the did:key form Keycast uses, and bearer validation in the order
//     of the Keycast server;
//   - PKCE, bunker key derivation (HKDF-SHA256), redirect origin rules;
//   - the file master key (AES-256-GCM) that seals user secret keys at rest;
//   - JSON request and response bodies of /api/auth/register,
//     /api/oauth/authorize, /api/oauth/token and /api/nostr, their error texts,
//     and the admission-rejection contract (HTTP 503, code admission_rejected);
//   - policies and permissions;
//   - the load tool's users file and results file, and the Prometheus series
//     the server exports on /api/metrics.
//
// The upstream facts behind all of it are in docs/protocol-keycast.md;
// deliberate differences are in docs/upstream-differences.md. Error values
// whose text is sent on the wire (for example [ErrTokenExpired] or the
// "Invalid event JSON: …" errors) carry the exact Keycast message and no
// package prefix; every other error starts with "keycast: ".
//
// BIP-340 is implemented here on top of the secp256k1 field and scalar
// arithmetic of github.com/btcsuite/btcd/btcec/v2, not with its schnorr
// subpackage: that subpackage needs modules the project does not carry, and a
// Signer that keeps the adjusted secret scalar and the x-only public key saves
// the second base multiplication the library's Sign does for every call. The
// implementation passes every row of the official BIP-340 vectors.
package keycast
