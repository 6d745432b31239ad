package keycaststore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/keycaststore"
	"github.com/loadproof/loadproof/internal/keycaststore/storetest"
	"github.com/loadproof/loadproof/internal/testwait"
)

func randHex(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// forEachBackend runs fn against a fresh store of each back end.
func forEachBackend(t *testing.T, fn func(t *testing.T, s keycaststore.Store, url string)) {
	for _, b := range storetest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			url := b.URL(t)
			s, err := keycaststore.Open(context.Background(), url, keycaststore.Options{})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			t.Cleanup(func() { s.Close() })
			fn(t, s, url)
		})
	}
}

func TestDialectOf(t *testing.T) {
	tests := []struct {
		url  string
		want keycaststore.Dialect
	}{
		{"postgres://u@h/db", keycaststore.Postgres},
		{"postgresql://u@h/db", keycaststore.Postgres},
		{"POSTGRES://u@h/db", keycaststore.Postgres},
		{"./keycast-data/keycast.sqlite3", keycaststore.SQLite},
		{"sqlite:///tmp/x.db", keycaststore.SQLite},
		{"file:x.db", keycaststore.SQLite},
		{"mysql://u@h/db", keycaststore.SQLite},
	}
	for _, tt := range tests {
		if got := keycaststore.DialectOf(tt.url); got != tt.want {
			t.Errorf("DialectOf(%q) = %v, want %v", tt.url, got, tt.want)
		}
	}
}

func TestMigrationsMatchAcrossDialects(t *testing.T) {
	lite, err := keycaststore.Migrations(keycaststore.SQLite)
	if err != nil {
		t.Fatal(err)
	}
	pg, err := keycaststore.Migrations(keycaststore.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	if len(lite) == 0 || len(lite) != len(pg) {
		t.Fatalf("sqlite has %d migrations, postgres %d; they must carry the same versions", len(lite), len(pg))
	}
	for i := range lite {
		if lite[i].Version != pg[i].Version || lite[i].Name != pg[i].Name {
			t.Errorf("migration %d: sqlite %s, postgres %s", i, lite[i].Name, pg[i].Name)
		}
	}
}

func TestOpenTwiceIsIdempotent(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s keycaststore.Store, url string) {
		s2, err := keycaststore.Open(context.Background(), url, keycaststore.Options{})
		if err != nil {
			t.Fatalf("second Open: %v", err)
		}
		defer s2.Close()
		ps, err := s2.Policies(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(ps) != 4 {
			t.Fatalf("after re-open: %d policies, want 4 (seed applied twice?)", len(ps))
		}
	})
}

func TestSeededPolicies(t *testing.T) {
	want := map[string][]string{
		"social":   {"allowed_kinds_social_messaging"},
		"readonly": {"decrypt_only"},
		"wallet":   {"allowed_kinds_zaps"},
		"full":     {"full_access"},
	}
	forEachBackend(t, func(t *testing.T, s keycaststore.Store, _ string) {
		ctx := context.Background()
		ps, err := s.Policies(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(ps) != len(want) {
			t.Fatalf("got %d policies, want %d", len(ps), len(want))
		}
		for _, p := range ps {
			ids, ok := want[p.Slug]
			if !ok {
				t.Errorf("unexpected policy %q", p.Slug)
				continue
			}
			if len(p.Permissions) != len(ids) || p.Permissions[0].Identifier != ids[0] {
				t.Errorf("policy %s permissions %+v, want %v", p.Slug, p.Permissions, ids)
			}
			if p.DisplayName == "" || p.Description == "" {
				t.Errorf("policy %s lacks display name or description: %+v", p.Slug, p)
			}
		}
		p, err := s.PolicyBySlug(ctx, "social")
		if err != nil {
			t.Fatal(err)
		}
		if p.Permissions[0].Config != `{"allowed_kinds": [0, 1, 3, 4, 7, 44, 1059, 9735, 22242]}` {
			t.Errorf("social config = %s", p.Permissions[0].Config)
		}
		if _, err := s.PolicyBySlug(ctx, "nope"); !errors.Is(err, keycaststore.ErrNotFound) {
			t.Errorf("unknown slug: err = %v, want ErrNotFound", err)
		}
	})
}

func TestEnsureTenantConcurrent(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s keycaststore.Store, _ string) {
		ctx := context.Background()
		def, err := s.TenantByDomain(ctx, "default")
		if err != nil || def.ID != keycaststore.DefaultTenantID {
			t.Fatalf("default tenant = %+v, %v", def, err)
		}
		if _, err := s.TenantByDomain(ctx, "example.test"); !errors.Is(err, keycaststore.ErrNotFound) {
			t.Fatalf("missing tenant: err = %v", err)
		}
		var wg sync.WaitGroup
		ids := make([]int64, 8)
		errs := make([]error, 8)
		for i := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tn, err := s.EnsureTenant(ctx, "example.test", "Example")
				ids[i], errs[i] = tn.ID, err
			}()
		}
		testwait.WaitGroup(t, &wg, testwait.Long, "the 8 EnsureTenant calls")
		for i := range ids {
			if errs[i] != nil {
				t.Fatalf("EnsureTenant %d: %v", i, errs[i])
			}
			if ids[i] != ids[0] || ids[i] == keycaststore.DefaultTenantID {
				t.Fatalf("EnsureTenant ids %v: want one new id", ids)
			}
		}
		if n, err := s.CountTenants(ctx); err != nil || n != 2 {
			t.Fatalf("CountTenants = %d, %v; want 2 (default and example.test)", n, err)
		}
	})
}

func newUser(t testing.TB, tenant int64) keycaststore.User {
	return keycaststore.User{
		Pubkey:       randHex(t, 32),
		TenantID:     tenant,
		Email:        "u" + randHex(t, 4) + "@test.local",
		PasswordHash: "$2a$04$placeholder",
	}
}

func TestUsers(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s keycaststore.Store, _ string) {
		ctx := context.Background()
		u := newUser(t, keycaststore.DefaultTenantID)
		u.VerificationToken = randHex(t, 32)
		u.VerificationExpiresAt = time.Now().Add(24 * time.Hour).Truncate(time.Millisecond)
		sealed := []byte{1, 2, 3, 4}
		if err := s.CreateUserWithKeys(ctx, u, sealed); err != nil {
			t.Fatal(err)
		}
		got, err := s.UserByEmail(ctx, keycaststore.DefaultTenantID, u.Email)
		if err != nil {
			t.Fatal(err)
		}
		if got.Pubkey != u.Pubkey || got.PasswordHash != u.PasswordHash || got.EmailVerified ||
			got.VerificationToken != u.VerificationToken || !got.VerificationExpiresAt.Equal(u.VerificationExpiresAt) {
			t.Errorf("UserByEmail = %+v, want %+v", got, u)
		}
		if _, err := s.UserByEmail(ctx, 999, u.Email); !errors.Is(err, keycaststore.ErrNotFound) {
			t.Errorf("other tenant: err = %v, want ErrNotFound", err)
		}
		if got, err := s.UserByPubkey(ctx, u.Pubkey); err != nil || got.Email != u.Email {
			t.Errorf("UserByPubkey = %+v, %v", got, err)
		}
		key, err := s.PersonalKey(ctx, u.Pubkey)
		if err != nil || string(key) != string(sealed) {
			t.Errorf("PersonalKey = %v, %v", key, err)
		}

		dupEmail := newUser(t, keycaststore.DefaultTenantID)
		dupEmail.Email = u.Email
		if err := s.CreateUserWithKeys(ctx, dupEmail, sealed); !errors.Is(err, keycaststore.ErrDuplicateEmail) {
			t.Errorf("duplicate email: err = %v, want ErrDuplicateEmail", err)
		}
		// The failed transaction left nothing behind.
		if _, err := s.UserByPubkey(ctx, dupEmail.Pubkey); !errors.Is(err, keycaststore.ErrNotFound) {
			t.Errorf("rolled-back user is visible: %v", err)
		}
		dupKey := newUser(t, keycaststore.DefaultTenantID)
		dupKey.Pubkey = u.Pubkey
		if err := s.CreateUserWithKeys(ctx, dupKey, sealed); !errors.Is(err, keycaststore.ErrDuplicateKey) {
			t.Errorf("duplicate key: err = %v, want ErrDuplicateKey", err)
		}
		if err := s.CreateUserWithKeys(ctx, newUser(t, 1), nil); err == nil {
			t.Error("user without a sealed key was accepted")
		}
	})
}

func TestCodes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s keycaststore.Store, _ string) {
		ctx := context.Background()
		now := time.Now()
		c := keycaststore.Code{
			Code: randHex(t, 16), TenantID: 1, UserPubkey: randHex(t, 32), ClientID: "loadtest",
			RedirectURI: "http://localhost:3000/callback", Scope: "policy:social",
			CodeChallenge: "abc", CodeChallengeMethod: "S256", ExpiresAt: now.Add(10 * time.Minute),
		}
		if err := s.CreateCode(ctx, c); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateCode(ctx, c); err == nil {
			t.Error("duplicate code accepted")
		}
		got, err := s.CodeByValue(ctx, 1, c.Code, now)
		if err != nil {
			t.Fatal(err)
		}
		if got.UserPubkey != c.UserPubkey || got.RedirectURI != c.RedirectURI || got.CodeChallenge != "abc" ||
			got.CodeChallengeMethod != "S256" || got.ClientID != "loadtest" || got.PreviousAuthID != 0 ||
			got.ExpiresAt.UnixMilli() != c.ExpiresAt.UnixMilli() {
			t.Errorf("CodeByValue = %+v, want %+v", got, c)
		}
		if _, err := s.CodeByValue(ctx, 2, c.Code, now); !errors.Is(err, keycaststore.ErrNotFound) {
			t.Errorf("other tenant: %v", err)
		}
		if _, err := s.CodeByValue(ctx, 1, c.Code, now.Add(11*time.Minute)); !errors.Is(err, keycaststore.ErrNotFound) {
			t.Errorf("expired code: %v", err)
		}
		if err := s.DeleteCode(ctx, 1, c.Code); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteCode(ctx, 1, c.Code); !errors.Is(err, keycaststore.ErrCodeUsed) {
			t.Errorf("second delete: %v, want ErrCodeUsed", err)
		}
		plain := c
		plain.Code = randHex(t, 16)
		plain.CodeChallenge, plain.CodeChallengeMethod = "", ""
		plain.ExpiresAt = now.Add(-time.Second)
		if err := s.CreateCode(ctx, plain); err != nil {
			t.Fatal(err)
		}
		n, err := s.DeleteExpiredCodes(ctx, now)
		if err != nil || n != 1 {
			t.Errorf("DeleteExpiredCodes = %d, %v; want 1", n, err)
		}
	})
}

func TestAuthorizationsAndHandlers(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s keycaststore.Store, _ string) {
		ctx := context.Background()
		u := newUser(t, 1)
		if err := s.CreateUserWithKeys(ctx, u, []byte("sealed")); err != nil {
			t.Fatal(err)
		}
		social, err := s.PolicyBySlug(ctx, "social")
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		a := keycaststore.Authorization{
			TenantID: 1, UserPubkey: u.Pubkey, RedirectOrigin: "http://localhost:3000", ClientID: "loadtest",
			BunkerPubkey: randHex(t, 32), Secret: randHex(t, 24), Relays: `["wss://relay.damus.io"]`,
			PolicyID: social.ID, Handle: randHex(t, 32), HandleExpiresAt: now.Add(30 * 24 * time.Hour),
		}
		id, err := s.CreateAuthorization(ctx, a)
		if err != nil || id == 0 {
			t.Fatalf("CreateAuthorization = %d, %v", id, err)
		}
		h, err := s.LoadHandler(ctx, a.BunkerPubkey)
		if err != nil {
			t.Fatal(err)
		}
		if h.Authorization.ID != id || h.Authorization.UserPubkey != u.Pubkey || string(h.EncryptedSecretKey) != "sealed" ||
			len(h.Permissions) != 1 || h.Permissions[0].Identifier != "allowed_kinds_social_messaging" ||
			!h.Authorization.Valid(now) || h.Authorization.Relays != a.Relays || h.Authorization.Secret != a.Secret {
			t.Errorf("LoadHandler = %+v", h)
		}
		if _, err := s.LoadHandler(ctx, randHex(t, 32)); !errors.Is(err, keycaststore.ErrNotFound) {
			t.Errorf("unknown bunker: %v", err)
		}
		if _, err := s.RevokeAuthorizations(ctx, 1, randHex(t, 32), a.BunkerPubkey, now); !errors.Is(err, keycaststore.ErrNotFound) {
			t.Errorf("revoke by another user: %v, want ErrNotFound", err)
		}
		ids, err := s.RevokeAuthorizations(ctx, 1, u.Pubkey, a.BunkerPubkey, now)
		if err != nil || len(ids) != 1 || ids[0] != id {
			t.Fatalf("RevokeAuthorizations = %v, %v", ids, err)
		}
		if _, err := s.RevokeAuthorizations(ctx, 1, u.Pubkey, a.BunkerPubkey, now); !errors.Is(err, keycaststore.ErrNotFound) {
			t.Errorf("second revoke: %v, want ErrNotFound", err)
		}
		h, err = s.LoadHandler(ctx, a.BunkerPubkey)
		if err != nil {
			t.Fatal(err)
		}
		if h.Authorization.Valid(now) || h.Authorization.RevokedAt.IsZero() {
			t.Errorf("revoked authorization still valid: %+v", h.Authorization)
		}

		// A full-access authorization (no policy) has no permissions; expiry is honoured.
		b := a
		b.BunkerPubkey = randHex(t, 32)
		b.PolicyID = 0
		b.ExpiresAt = now.Add(time.Hour)
		id2, err := s.CreateAuthorization(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		h, err = s.LoadHandler(ctx, b.BunkerPubkey)
		if err != nil {
			t.Fatal(err)
		}
		if h.Permissions != nil || !h.Authorization.Valid(now) || h.Authorization.Valid(now.Add(2*time.Hour)) {
			t.Errorf("full-access handler = %+v", h)
		}
		if err := s.RevokeAuthorizationByID(ctx, id2, now); err != nil {
			t.Fatal(err)
		}
		got, err := s.AuthorizationByBunker(ctx, b.BunkerPubkey)
		if err != nil || got.RevokedAt.IsZero() {
			t.Errorf("after RevokeAuthorizationByID: %+v, %v", got, err)
		}
	})
}

func TestProvision(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s keycaststore.Store, _ string) {
		ctx := context.Background()
		tn, err := s.EnsureTenant(ctx, "loadtest.keycast.local", "Load Test Tenant")
		if err != nil {
			t.Fatal(err)
		}
		const n = 1203 // crosses the batch size twice
		batch := make([]keycaststore.Provision, n)
		for i := range batch {
			u := newUser(t, tn.ID)
			u.Email = fmt.Sprintf("loadtest-%d@test.local", i)
			batch[i] = keycaststore.Provision{
				User: u, EncryptedSecretKey: []byte{byte(i % 256)},
				Authorization: keycaststore.Authorization{
					BunkerPubkey: randHex(t, 32), Secret: randHex(t, 16), Relays: `["wss://relay.example.com"]`,
					Handle: randHex(t, 32), HandleExpiresAt: time.Now().Add(time.Hour),
				},
			}
		}
		if err := s.Provision(ctx, batch); err != nil {
			t.Fatal(err)
		}
		last := batch[n-1]
		h, err := s.LoadHandler(ctx, last.Authorization.BunkerPubkey)
		if err != nil {
			t.Fatal(err)
		}
		if h.Authorization.UserPubkey != last.User.Pubkey || h.Authorization.TenantID != tn.ID || h.EncryptedSecretKey[0] != byte((n-1)%256) {
			t.Errorf("provisioned handler = %+v", h)
		}
		// A duplicate in a later batch names its index and leaves earlier batches in place.
		dup := []keycaststore.Provision{batch[0]}
		dup[0].Authorization.BunkerPubkey = randHex(t, 32)
		dup[0].User.Email = "fresh@test.local"
		if err := s.Provision(ctx, dup); !errors.Is(err, keycaststore.ErrDuplicateKey) {
			t.Errorf("duplicate provision: %v, want ErrDuplicateKey", err)
		}
	})
}

func TestClosedStore(t *testing.T) {
	s, err := keycaststore.Open(context.Background(), storetest.SQLiteURL(t), keycaststore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := s.Ping(context.Background()); !errors.Is(err, keycaststore.ErrClosed) {
		t.Errorf("Ping after Close: %v", err)
	}
}

func TestOpenErrors(t *testing.T) {
	tests := []struct{ name, url string }{
		{"missing directory", "/nonexistent-dir-for-keycast/x/keycast.sqlite3"},
		{"empty", ""},
		{"bad postgres url", "postgres://%zz"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if s, err := keycaststore.Open(ctx, tt.url, keycaststore.Options{}); err == nil {
				s.Close()
				t.Fatalf("Open(%q) succeeded", tt.url)
			}
		})
	}
}
