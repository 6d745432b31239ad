package linkkeys

import (
	"fmt"

	"github.com/fxamacker/cbor/v2"
)

// HelloRequest is the Hello/hello request. A nil Name is sent as
// {"name": null}, which is what the upstream load test sends.
type HelloRequest struct {
	Name *string `cbor:"name"`
}

// HelloResponse is the Hello/hello response: "Hello, <name or world>!".
type HelloResponse struct {
	Greeting string `cbor:"greeting"`
}

// CheckResult is the Ops/healthcheck and Ops/readiness response as the
// reference server sends it: {"result": bool}.
type CheckResult struct {
	Result bool `cbor:"result"`
}

// HandshakeAlgorithms lists algorithm names (CSIL AlgorithmSupport).
type HandshakeAlgorithms struct {
	Signing    []string `cbor:"signing"`
	Encryption []string `cbor:"encryption,omitempty"`
}

// HandshakeRequest is the Handshake/handshake request.
type HandshakeRequest struct {
	Version    string              `cbor:"version"`
	Algorithms HandshakeAlgorithms `cbor:"algorithms"`
}

// HandshakeResponse is the Handshake/handshake response: version "v1alpha"
// and the intersection of the caller's and the server's algorithms.
type HandshakeResponse struct {
	Version    string              `cbor:"version"`
	Algorithms HandshakeAlgorithms `cbor:"algorithms"`
}

// DomainPublicKey is one active domain key in a get-domain-keys response.
type DomainPublicKey struct {
	KeyID     string  `cbor:"key_id"`
	Algorithm string  `cbor:"algorithm"`  // "ed25519" or "x25519"
	KeyUsage  string  `cbor:"key_usage"`  // "sign" or "encrypt"
	CreatedAt string  `cbor:"created_at"` // as stored
	ExpiresAt string  `cbor:"expires_at"` // RFC 3339
	PublicKey []byte  `cbor:"public_key"` // 32 raw bytes
	RevokedAt *string `cbor:"revoked_at,omitempty"`
	// Fingerprint is the lowercase hex SHA-256 of PublicKey.
	Fingerprint string `cbor:"fingerprint"`
	// KeySignature and SignedByKeyID are set for encryption keys only: the
	// signing key's vouch over this key's fingerprint and expiry.
	KeySignature  []byte  `cbor:"key_signature,omitempty"`
	SignedByKeyID *string `cbor:"signed_by_key_id,omitempty"`
}

// GetDomainKeysResponse is the DomainKeys/get-domain-keys response. The
// reference server always sends RecentRevocationsAvailable.
type GetDomainKeysResponse struct {
	Keys                       []DomainPublicKey `cbor:"keys"`
	Domain                     string            `cbor:"domain"`
	RecentRevocationsAvailable *bool             `cbor:"recent_revocations_available,omitempty"`
}

// GetRevocationsRequest is the DomainKeys/get-revocations request; Since is
// an RFC 3339 UTC lower bound on revoked_at.
type GetRevocationsRequest struct {
	Since *string `cbor:"since,omitempty"`
}

// GetRevocationsResponse is the DomainKeys/get-revocations response.
type GetRevocationsResponse struct {
	Revocations []Revocation `cbor:"revocations"`
}

// Revocation is a sibling-signed key revocation certificate (CSIL
// RevocationCertificate): a quorum of the domain's other signing keys sign
// the revocation of the target key.
type Revocation struct {
	TargetKeyID       string           `cbor:"target_key_id"`
	TargetFingerprint string           `cbor:"target_fingerprint"`
	RevokedAt         string           `cbor:"revoked_at"`
	Signatures        []ClaimSignature `cbor:"signatures"`
}

// ClaimSignature is one domain key's signature (CSIL ClaimSignature).
type ClaimSignature struct {
	Domain        string `cbor:"domain"`
	SignedByKeyID string `cbor:"signed_by_key_id"`
	Signature     []byte `cbor:"signature"`
}

var (
	payloadEnc cbor.EncMode
	payloadDec cbor.DecMode
)

func init() {
	eo := cbor.CoreDetEncOptions()
	// Required lists are sent as [] even when empty, never as null.
	eo.NilContainers = cbor.NilContainerAsEmpty
	em, err := eo.EncMode()
	if err != nil {
		panic("linkkeys: building CBOR encode mode: " + err.Error())
	}
	payloadEnc = em
	dm, err := cbor.DecOptions{
		MaxNestedLevels: MaxDepth,
		DupMapKey:       cbor.DupMapKeyEnforcedAPF,
		UTF8:            cbor.UTF8RejectInvalid,
	}.DecMode()
	if err != nil {
		panic("linkkeys: building CBOR decode mode: " + err.Error())
	}
	payloadDec = dm
}

// EncodePayload returns the deterministic CBOR encoding of v (RFC 8949 core
// deterministic: shortest heads, keys sorted by encoded bytes; nil lists as
// []; optional fields omitted when absent).
func EncodePayload(v any) ([]byte, error) {
	b, err := payloadEnc.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("linkkeys: encoding %T payload: %w", v, err)
	}
	return b, nil
}

// DecodePayload decodes one CBOR item from b into v (a pointer). Unknown
// keys are ignored for forward compatibility; trailing bytes, duplicate keys,
// invalid UTF-8 and nesting deeper than MaxDepth are rejected.
func DecodePayload(b []byte, v any) error {
	if err := payloadDec.Unmarshal(b, v); err != nil {
		return fmt.Errorf("linkkeys: decoding %T payload: %w", v, err)
	}
	return nil
}
