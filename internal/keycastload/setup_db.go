package keycastload

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/loadproof/loadproof/internal/boundedfile"
	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/keycaststore"
)

// dbBatch is how many users DB-mode setup prepares before writing them in one call.
const dbBatch = 500

// setupDB writes complete users straight into the server's store (upstream's DB mode), with
// what upstream forgets: each user's personal_keys row, sealed with the server's master key, so
// that the server can load the user's handler and sign (a quirk fixed; see
// docs/upstream-differences.md).
//
// Per user: a fresh secret key; users(email loadtest-{unix_ts}-{6 random}-{i}@test.local — upstream's
// loadtest-{i} collides on a second run, and a timestamp alone on a second run in the same second —,
// the placeholder password hash, email_verified); its
// sealed key; an oauth_authorizations row with a 32-character connection secret, the bunker key
// derived from the user key and that secret exactly as the token endpoint derives it (upstream
// draws an unrelated random key), relays ["wss://relay.example.com"], a 64-hex
// authorization_handle expiring in 30 days and no policy (full access); and an access token: a
// UCAN the user signs for itself (issuer = audience, as upstream) with facts tenant_id, email,
// redirect_origin http://loadtest.keycast.local and bunker_pubkey, valid 24 h. The Keycast
// server's validation accepts a token whose issuer is the user (docs/protocol-keycast.md, UCAN
// tokens).
func setupDB(ctx context.Context, cfg SetupConfig) (*SetupResult, error) {
	mkBytes, err := boundedfile.Read(cfg.MasterKeyPath, boundedfile.Key)
	if err != nil {
		return nil, fmt.Errorf("keycastload: DB mode seals each user's key with the server's master key, and reading %s failed: %w; pass the server's file with --master-key-path or MASTER_KEY_PATH", cfg.MasterKeyPath, err)
	}
	mk, err := keycast.ParseMasterKey(mkBytes)
	if err != nil {
		return nil, fmt.Errorf("keycastload: master key %s: %w", cfg.MasterKeyPath, err)
	}
	st, err := keycaststore.Open(ctx, cfg.DatabaseURL, keycaststore.Options{})
	if err != nil {
		return nil, fmt.Errorf("keycastload: opening the server's database for DB-mode setup: %w", err)
	}
	defer st.Close()
	tenant, err := st.EnsureTenant(ctx, keycast.LoadtestTenantDomain, keycast.LoadtestTenantName)
	if err != nil {
		return nil, fmt.Errorf("keycastload: creating the load-test tenant %s: %w", keycast.LoadtestTenantDomain, err)
	}
	cfg.Logger.Info("DB-mode setup", "database", st.Dialect().String(), "tenant", tenant.ID, "users", cfg.Users)

	ps := newProgress(ctx, cfg, "writing users", 1000)
	defer ps.finish()
	res := &SetupResult{File: &keycast.UsersFile{Users: make([]keycast.TestUser, 0, cfg.Users)}, Failures: map[string]int{}}
	runID := newRunID(time.Now()) // {unix_ts}-{6 random}: two runs in one second do not collide
	for start := 0; start < cfg.Users; start += dbBatch {
		if ctx.Err() != nil {
			res.Interrupted = true
			break
		}
		n := min(dbBatch, cfg.Users-start)
		batch := make([]keycaststore.Provision, n)
		users := make([]keycast.TestUser, n)
		errs := make([]error, n)
		now := time.Now()
		var wg sync.WaitGroup
		workers := runtime.GOMAXPROCS(0)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := w; j < n; j += workers {
					batch[j], users[j], errs[j] = prepareDBUser(mk, tenant.ID, fmt.Sprintf("loadtest-%s-%d@test.local", runID, start+j), cfg.Lifetime, now)
				}
			}()
		}
		wg.Wait()
		for _, e := range errs {
			if e != nil {
				return nil, e
			}
		}
		res.Attempted += n
		if err := st.Provision(ctx, batch); err != nil {
			res.Failures["db: "+err.Error()] += n
			for range n {
				ps.step(false)
			}
			// A failed batch means the store refuses writes; later batches would fail alike.
			break
		}
		res.File.Users = append(res.File.Users, users...)
		for range n {
			ps.step(true)
		}
	}
	ps.finish()
	fmt.Fprintf(cfg.Progress, "Wrote %d of %d users into the %s database (%d failed)\n", len(res.File.Users), cfg.Users, st.Dialect(), sumFailures(res.Failures))
	return res, nil
}

// prepareDBUser makes one user's rows and access token.
func prepareDBUser(mk keycast.MasterKey, tenantID int64, email string, lifetime time.Duration, now time.Time) (keycaststore.Provision, keycast.TestUser, error) {
	sk, err := keycast.GenerateSecretKey()
	if err != nil {
		return keycaststore.Provision{}, keycast.TestUser{}, err
	}
	signer := keycast.NewSigner(sk)
	pub := signer.Public()
	sealed, err := mk.Seal(sk[:])
	if err != nil {
		return keycaststore.Provision{}, keycast.TestUser{}, fmt.Errorf("keycastload: sealing a user key: %w", err)
	}
	secret := randomAlphanumeric(32)
	bunker, err := keycast.DeriveBunkerKey(sk, secret)
	if err != nil {
		return keycaststore.Provision{}, keycast.TestUser{}, fmt.Errorf("keycastload: deriving a bunker key: %w", err)
	}
	bunkerPub := bunker.Public().Hex()
	var handle [32]byte
	if _, err := rand.Read(handle[:]); err != nil {
		return keycaststore.Provision{}, keycast.TestUser{}, fmt.Errorf("keycastload: reading random bytes: %w", err)
	}
	token, err := keycast.MintUCAN(signer, pub, keycast.Facts{
		TenantID:       keycast.Int64(tenantID),
		Email:          email,
		RedirectOrigin: keycast.LoadtestRedirectOrigin,
		BunkerPubkey:   bunkerPub,
	}, lifetime, now)
	if err != nil {
		return keycaststore.Provision{}, keycast.TestUser{}, fmt.Errorf("keycastload: minting a user token: %w", err)
	}
	p := keycaststore.Provision{
		User: keycaststore.User{
			Pubkey: pub.Hex(), TenantID: tenantID, Email: email,
			PasswordHash: keycast.LoadtestPasswordHash, EmailVerified: true, CreatedAt: now,
		},
		EncryptedSecretKey: sealed,
		Authorization: keycaststore.Authorization{
			TenantID:        tenantID,
			UserPubkey:      pub.Hex(),
			RedirectOrigin:  keycast.LoadtestRedirectOrigin,
			ClientID:        keycast.LoadtestClientID,
			BunkerPubkey:    bunkerPub,
			Secret:          secret,
			Relays:          keycast.LoadtestDBRelaysJSON,
			Handle:          hex.EncodeToString(handle[:]),
			HandleExpiresAt: now.Add(30 * 24 * time.Hour),
			CreatedAt:       now,
		},
	}
	return p, keycast.TestUser{Pubkey: pub.Hex(), Email: email, UcanToken: token}, nil
}
