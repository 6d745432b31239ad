-- Issued revocations: revocation certificates this domain issued for its own
-- keys (CSIL RevocationCertificate), served by DomainKeys/get-revocations and
-- behind get-domain-keys' recent_revocations_available.
CREATE TABLE issued_revocations (
    id                 TEXT PRIMARY KEY,                          -- UUIDv7
    target_key_id      TEXT NOT NULL,                             -- domain_keys.id of the revoked key; no foreign
                                                                  -- key, so pruning old keys keeps the certificate
    target_fingerprint TEXT NOT NULL,                             -- fingerprint of the revoked key
    revoked_at         TEXT NOT NULL,                             -- RFC 3339 UTC, whole seconds
    signatures         BLOB NOT NULL,                             -- deterministic CBOR array of ClaimSignature
                                                                  -- {domain, signed_by_key_id, signature}
    created_at         TEXT NOT NULL DEFAULT (datetime('now'))
);

CREATE UNIQUE INDEX issued_revocations_target ON issued_revocations(target_key_id);
CREATE INDEX issued_revocations_by_revoked_at ON issued_revocations(revoked_at);
