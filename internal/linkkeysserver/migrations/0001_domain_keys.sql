-- Domain keys: the domain's signing (Ed25519) and encryption (X25519) keys,
-- with the columns of LinkKeys' domain_keys table (docs/protocol-linkkeys.md, Storage).
CREATE TABLE domain_keys (
    id                    TEXT PRIMARY KEY,                       -- UUIDv7
    public_key            BLOB NOT NULL,                          -- 32 raw bytes
    private_key_encrypted BLOB,                                   -- "LK2\x01" Argon2id + AES-256-GCM blob; NULL when
                                                                  -- the private key was kept in memory only
    fingerprint           TEXT NOT NULL,                          -- lowercase hex SHA-256 of public_key
    algorithm             TEXT NOT NULL DEFAULT 'ed25519',        -- 'ed25519' or 'x25519'
    created_at            TEXT NOT NULL DEFAULT (datetime('now')),-- 'YYYY-MM-DD HH:MM:SS' UTC
    expires_at            TEXT NOT NULL,                          -- RFC 3339 UTC, whole seconds
    revoked_at            TEXT,                                   -- RFC 3339 UTC when revoked
    updated_at            TEXT NOT NULL DEFAULT (datetime('now')),
    key_usage             TEXT NOT NULL DEFAULT 'sign',           -- 'sign' or 'encrypt'
    signed_by_key_id      TEXT REFERENCES domain_keys(id),        -- encryption keys: the vouching signing key
    key_signature         BLOB,                                   -- encryption keys: the vouch signature
    CHECK (length(public_key) = 32),
    CHECK (key_usage IN ('sign', 'encrypt'))
);

CREATE UNIQUE INDEX domain_keys_fingerprint ON domain_keys(fingerprint);
CREATE INDEX domain_keys_active ON domain_keys(revoked_at, expires_at, created_at);

CREATE TRIGGER domain_keys_touch_updated_at AFTER UPDATE ON domain_keys
FOR EACH ROW WHEN NEW.updated_at = OLD.updated_at
BEGIN
    UPDATE domain_keys SET updated_at = datetime('now') WHERE id = NEW.id;
END;
