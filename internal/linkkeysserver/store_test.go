package linkkeysserver

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/linkkeys"
	"github.com/loadproof/loadproof/internal/testwait"
)

func openTestStore(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "db.sqlite3")
	s, err := OpenStore(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

func TestMigrationsAreVersionedAndIdempotent(t *testing.T) {
	migs, err := Migrations()
	if err != nil || len(migs) < 2 {
		t.Fatalf("migrations %v %v", migs, err)
	}
	s, path := openTestStore(t)
	ctx := context.Background()
	applied, err := s.AppliedMigrations(ctx)
	if err != nil || len(applied) != len(migs) {
		t.Fatalf("applied %v %v", applied, err)
	}
	// Reopening applies nothing twice; several processes opening at once
	// (here: goroutines with their own pools) agree.
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s2, err := OpenStore(ctx, path)
			if err != nil {
				errs <- err
				return
			}
			s2.Close()
		}()
	}
	testwait.WaitGroup(t, &wg, testwait.Long, "the four reopens")
	close(errs)
	for err := range errs {
		t.Errorf("reopen: %v", err)
	}
	again, _ := s.AppliedMigrations(ctx)
	if len(again) != len(migs) {
		t.Errorf("after reopening: %v", again)
	}
	var mode string
	var busy int
	if err := s.DB().QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode %q %v, want wal", mode, err)
	}
	if err := s.DB().QueryRow("PRAGMA busy_timeout").Scan(&busy); err != nil || busy != 5000 {
		t.Errorf("busy_timeout %d %v, want 5000", busy, err)
	}
	for _, table := range []string{"domain_keys", "issued_revocations", "schema_migrations"} {
		var n int
		if err := s.DB().QueryRow("SELECT count(*) FROM " + table).Scan(&n); err != nil {
			t.Errorf("table %s: %v", table, err)
		}
	}
}

func TestOpenStoreRejectsNonFiles(t *testing.T) {
	for _, p := range []string{"", ":memory:", "a?b", "x#y"} {
		if _, err := OpenStore(context.Background(), p); err == nil {
			t.Errorf("OpenStore(%q) accepted", p)
		}
	}
	if _, err := OpenStore(context.Background(), filepath.Join(t.TempDir(), "missing", "db")); err == nil {
		t.Error("OpenStore in a missing directory accepted")
	}
}

func TestActiveDomainKeys(t *testing.T) {
	s, _ := openTestStore(t)
	ctx := context.Background()
	now := time.Now()
	mk := func(usage, alg string, expires time.Time, signedBy *string, sig []byte) string {
		pub := make([]byte, 32)
		rand.Read(pub)
		id, err := s.InsertDomainKey(ctx, DomainKey{PublicKey: pub, Algorithm: alg, KeyUsage: usage, ExpiresAt: expires, SignedByKeyID: signedBy, KeySignature: sig})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	sign := mk("sign", "ed25519", now.Add(time.Hour), nil, nil)
	_ = mk("sign", "ed25519", now.Add(-time.Hour), nil, nil) // expired
	enc := mk("encrypt", "x25519", now.Add(time.Hour), &sign, []byte{9, 9})
	revoked := mk("sign", "ed25519", now.Add(time.Hour), nil, nil)
	if err := s.InsertRevocation(ctx, linkkeys.Revocation{TargetKeyID: revoked, TargetFingerprint: "f",
		RevokedAt: now.UTC().Format(time.RFC3339), Signatures: []linkkeys.ClaimSignature{}}); err != nil {
		t.Fatal(err)
	}
	keys, err := s.ActiveDomainKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 || keys[0].KeyID != sign || keys[1].KeyID != enc {
		t.Fatalf("active keys %+v, want the signing then the encryption key", keys)
	}
	e := keys[1]
	if e.KeyUsage != "encrypt" || e.Algorithm != "x25519" || e.SignedByKeyID == nil || *e.SignedByKeyID != sign ||
		!bytes.Equal(e.KeySignature, []byte{9, 9}) || e.Fingerprint != linkkeys.Fingerprint(e.PublicKey) {
		t.Errorf("encryption key %+v", e)
	}
	if keys[0].KeySignature != nil || keys[0].SignedByKeyID != nil {
		t.Errorf("signing key carries vouch fields: %+v", keys[0])
	}
	if !regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$`).MatchString(keys[0].CreatedAt) ||
		!regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`).MatchString(keys[0].ExpiresAt) {
		t.Errorf("timestamps created_at %q expires_at %q", keys[0].CreatedAt, keys[0].ExpiresAt)
	}
	// The whole response encodes.
	if _, err := linkkeys.EncodePayload(linkkeys.GetDomainKeysResponse{Keys: keys, Domain: "d"}); err != nil {
		t.Error(err)
	}
}

func TestRevocations(t *testing.T) {
	s, _ := openTestStore(t)
	ctx := context.Background()
	old := time.Now().Add(-30 * 24 * time.Hour).UTC().Format(time.RFC3339)
	recent := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	sig := []linkkeys.ClaimSignature{{Domain: "d", SignedByKeyID: "k", Signature: []byte{1}}}
	for i, at := range []string{old, recent} {
		if err := s.InsertRevocation(ctx, linkkeys.Revocation{TargetKeyID: string(rune('a' + i)), TargetFingerprint: "f", RevokedAt: at, Signatures: sig}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.InsertRevocation(ctx, linkkeys.Revocation{TargetKeyID: "c", RevokedAt: "yesterday"}); err == nil {
		t.Error("a non-RFC 3339 revoked_at was stored")
	}
	all, err := s.RevocationsSince(ctx, time.Now().Add(-180*24*time.Hour))
	if err != nil || len(all) != 2 || all[0].RevokedAt != old || len(all[1].Signatures) != 1 {
		t.Errorf("all revocations %+v %v", all, err)
	}
	since, _ := s.RevocationsSince(ctx, time.Now().Add(-14*24*time.Hour))
	if len(since) != 1 || since[0].TargetKeyID != "b" {
		t.Errorf("recent revocations %+v", since)
	}
	for _, tc := range []struct {
		since time.Duration
		want  bool
	}{{-14 * 24 * time.Hour, true}, {-time.Minute, false}} {
		got, err := s.HasRevocationsSince(ctx, time.Now().Add(tc.since))
		if err != nil || got != tc.want {
			t.Errorf("HasRevocationsSince(now%v) = %v %v", tc.since, got, err)
		}
	}
}

func TestPrepareServerKey(t *testing.T) {
	ctx := context.Background()
	active := func(s *Store) []linkkeys.DomainPublicKey {
		t.Helper()
		k, err := s.ActiveDomainKeys(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	t.Run("memory only", func(t *testing.T) {
		s, _ := openTestStore(t)
		k1, err := s.PrepareServerKey(ctx, ServerKeyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		keys := active(s)
		if len(keys) != 1 || keys[0].Fingerprint != linkkeys.Fingerprint(k1.Public().(ed25519.PublicKey)) {
			t.Fatalf("after the first start: %+v", keys)
		}
		var priv []byte
		s.DB().QueryRow("SELECT private_key_encrypted FROM domain_keys").Scan(&priv)
		if priv != nil {
			t.Error("private key stored without a passphrase")
		}
		// A restart retires the unusable key: still one active key.
		k2, _ := s.PrepareServerKey(ctx, ServerKeyOptions{})
		keys = active(s)
		if k1.Equal(k2) || len(keys) != 1 || keys[0].Fingerprint != linkkeys.Fingerprint(k2.Public().(ed25519.PublicKey)) {
			t.Errorf("after a restart: %d active keys", len(keys))
		}
	})
	t.Run("passphrase", func(t *testing.T) {
		s, _ := openTestStore(t)
		pass := []byte("correct horse")
		k1, err := s.PrepareServerKey(ctx, ServerKeyOptions{Passphrase: pass})
		if err != nil {
			t.Fatal(err)
		}
		k2, err := s.PrepareServerKey(ctx, ServerKeyOptions{Passphrase: pass})
		if err != nil || !k1.Equal(k2) {
			t.Fatalf("the stored key was not reused: %v", err)
		}
		if len(active(s)) != 1 {
			t.Errorf("%d active keys, want 1", len(active(s)))
		}
		if _, err := s.PrepareServerKey(ctx, ServerKeyOptions{Passphrase: []byte("wrong")}); !errors.Is(err, ErrWrongPassphrase) {
			t.Errorf("wrong passphrase: %v", err)
		}
	})
	t.Run("dont store", func(t *testing.T) {
		s, _ := openTestStore(t)
		s.PrepareServerKey(ctx, ServerKeyOptions{})
		if _, err := s.PrepareServerKey(ctx, ServerKeyOptions{DontStore: true}); err != nil {
			t.Fatal(err)
		}
		if n := len(active(s)); n != 0 {
			t.Errorf("%d active keys with DontStore after a memory-only run, want 0 (the upstream empty list)", n)
		}
	})
}

func TestPrivateKeyEncryption(t *testing.T) {
	seed := bytes.Repeat([]byte{7}, 32)
	blob, err := EncryptPrivateKey(seed, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(blob, []byte("LK2\x01")) || len(blob) != 16+16+12+32+16 {
		t.Errorf("blob layout: %d bytes, prefix %q", len(blob), blob[:4])
	}
	got, err := DecryptPrivateKey(blob, []byte("pw"))
	if err != nil || !bytes.Equal(got, seed) {
		t.Errorf("round trip: %v", err)
	}
	if _, err := DecryptPrivateKey(blob, []byte("px")); !errors.Is(err, ErrWrongPassphrase) {
		t.Errorf("wrong passphrase: %v", err)
	}
	// The legacy headerless layout (salt | nonce | ct) with default costs.
	legacy := blob[16:]
	if got, err := DecryptPrivateKey(legacy, []byte("pw")); err != nil || !bytes.Equal(got, seed) {
		t.Errorf("legacy layout: %v", err)
	}
	if _, err := EncryptPrivateKey(seed, nil); err == nil {
		t.Error("empty passphrase accepted")
	}
}

func TestParseKeyBlobRejects(t *testing.T) {
	good, _ := EncryptPrivateKey(make([]byte, 32), []byte("pw"))
	huge := append([]byte(nil), good...)
	huge[4], huge[5] = 0xff, 0xff // m_cost far above the bound
	for _, tc := range []struct {
		name string
		blob []byte
		want string
	}{
		{"empty", nil, "too short"},
		{"short v2", good[:20], "too short for the v2 layout"},
		{"huge memory cost", huge, "outside the accepted"},
	} {
		if _, err := DecryptPrivateKey(tc.blob, []byte("pw")); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

func FuzzParseKeyBlob(f *testing.F) {
	good, _ := EncryptPrivateKey(make([]byte, 32), []byte("pw"))
	f.Add(good)
	f.Add(good[16:])
	f.Add([]byte("LK2\x01"))
	f.Fuzz(func(t *testing.T, blob []byte) {
		p, err := parseKeyBlob(blob)
		if err != nil {
			return
		}
		if p.m > maxMCost || p.t > maxTCost || p.p > maxPCost || p.m < 8*p.p || len(p.salt) != keySaltLen || len(p.nonce) != keyNonceLen {
			t.Errorf("accepted out-of-range parameters %+v", p)
		}
	})
}

func TestNewUUIDv7(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	a, b := NewUUIDv7(time.Unix(1, 0)), NewUUIDv7(time.Unix(2, 0))
	if !re.MatchString(a) || !re.MatchString(b) || a >= b {
		t.Errorf("UUIDv7 %q %q: not version 7 or not time-ordered", a, b)
	}
}
