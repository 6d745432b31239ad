package keycastserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/crypto/bcrypt"

	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/keycaststore"
)

// Messages of Keycast's AuthError (docs/protocol-keycast.md, Status codes and error bodies), as
// data.
const (
	msgEmailExists     = "This email is already registered. Please log in instead."
	msgKeyExists       = "This Nostr key is already registered. Please log in instead or use a different key."
	msgSessionRevoked  = "Session revoked successfully"
	msgInvalidEmail    = "Invalid email address"
	codeInvalidEmail   = "INVALID_EMAIL"
	msgPasswordMissing = "Password is required"
	// maxPasswordBytes is bcrypt's input limit.
	maxPasswordBytes = 72
	// maxEmailBytes is RFC 5321's limit on a forward path less the angle brackets.
	maxEmailBytes = 254
)

// authTimeout bounds the database and CPU work of one auth or OAuth request.
const authTimeout = 30 * time.Second

// sessionCookie is the Set-Cookie value of register and login.
func (s *Server) sessionCookie(token string) string {
	return keycast.SessionCookieName + "=" + token + "; HttpOnly; Secure; SameSite=Lax; Path=/; Max-Age=" +
		strconv.FormatInt(int64(s.cfg.TokenLifetime/time.Second), 10)
}

// origin returns the request's Origin header, required by register and login.
func requestOrigin(r *http.Request) (string, bool) {
	o := strings.TrimSpace(r.Header.Get("Origin"))
	return o, o != ""
}

// serveRegister is POST /api/auth/register (Dec-2025 behaviour: the answer sets the session
// cookie the OAuth step needs).
func (s *Server) serveRegister(w http.ResponseWriter, r *http.Request, tenantID int64) {
	origin, ok := requestOrigin(r)
	if !ok {
		writeError(w, http.StatusBadRequest, keycast.MsgOriginRequired, "")
		return
	}
	var req keycast.RegisterRequest
	if err := s.decodeJSON(r, &req, "email", "password"); err != nil {
		writeBodyError(w, err)
		return
	}
	email, problem := normalizeEmail(req.Email)
	if problem != "" {
		writeError(w, http.StatusBadRequest, msgInvalidEmail+": "+problem, codeInvalidEmail)
		return
	}
	if req.Password == "" {
		writeError(w, http.StatusBadRequest, msgPasswordMissing, "")
		return
	}
	if len(req.Password) > maxPasswordBytes {
		writeError(w, http.StatusBadRequest, "Password is longer than 72 bytes", "")
		return
	}
	var sk keycast.SecretKey
	if req.Nsec != nil && strings.TrimSpace(*req.Nsec) != "" {
		k, err := keycast.ParseSecretKey(*req.Nsec)
		if err != nil {
			writeError(w, http.StatusBadRequest, "Invalid nsec: "+trimPrefix(err.Error()), "")
			return
		}
		sk = k
	} else {
		k, err := keycast.GenerateSecretKey()
		if err != nil {
			s.log.Error("generating a user key failed", "err", err)
			writeError(w, http.StatusServiceUnavailable, keycast.MsgServiceUnavailable, "")
			return
		}
		sk = k
	}
	ctx, cancel := context.WithTimeout(r.Context(), authTimeout)
	defer cancel()

	hash, err := s.bcryptHash(ctx, req.Password)
	if err != nil {
		s.authFail(w, err)
		return
	}
	signer := keycast.NewSigner(sk)
	pub := signer.Public()
	sealed, err := keycast.SealWith(s.aead, sk[:])
	if err != nil {
		s.authFail(w, err)
		return
	}
	now := s.cfg.Now()
	err = s.store.CreateUserWithKeys(ctx, keycaststore.User{
		Pubkey: pub.Hex(), TenantID: tenantID, Email: email, PasswordHash: string(hash),
		VerificationToken: randomHex(32), VerificationExpiresAt: now.Add(24 * time.Hour), CreatedAt: now,
	}, sealed)
	switch {
	case errors.Is(err, keycaststore.ErrDuplicateEmail):
		writeError(w, http.StatusConflict, msgEmailExists, "")
		return
	case errors.Is(err, keycaststore.ErrDuplicateKey):
		writeError(w, http.StatusConflict, msgKeyExists, "")
		return
	case err != nil:
		s.authFail(w, err)
		return
	}
	tok, err := s.mintSession(signer, tenantID, email, origin, req.Relays, now)
	if err != nil {
		s.authFail(w, err)
		return
	}
	s.m.registrations.Add(1)
	w.Header().Add("Set-Cookie", s.sessionCookie(tok))
	writeJSON(w, http.StatusOK, keycast.RegisterResponse{Success: true, Pubkey: pub.Hex()})
}

// serveLogin is POST /api/auth/login: email and password against the tenant's users.
func (s *Server) serveLogin(w http.ResponseWriter, r *http.Request, tenantID int64) {
	origin, ok := requestOrigin(r)
	if !ok {
		writeError(w, http.StatusBadRequest, keycast.MsgOriginRequired, "")
		return
	}
	var req struct {
		Email    string `json:"email"`
		Password string `json:"password"`
	}
	if err := s.decodeJSON(r, &req, "email", "password"); err != nil {
		writeBodyError(w, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), authTimeout)
	defer cancel()
	typed := strings.TrimSpace(req.Email)
	email, _ := normalizeEmail(typed)
	u, err := s.store.UserByEmail(ctx, tenantID, email)
	if errors.Is(err, keycaststore.ErrNotFound) && email != typed {
		// A row stored before addresses were lower-cased.
		u, err = s.store.UserByEmail(ctx, tenantID, typed)
	}
	if errors.Is(err, keycaststore.ErrNotFound) {
		s.m.loginFailures.Add(1)
		writeError(w, http.StatusUnauthorized, keycast.MsgOAuthUnauthorized, "")
		return
	}
	if err != nil {
		s.authFail(w, err)
		return
	}
	release, err := s.acquireCPU(ctx, time.Time{})
	if err != nil {
		s.authFail(w, err)
		return
	}
	err = bcrypt.CompareHashAndPassword([]byte(u.PasswordHash), []byte(req.Password))
	release()
	if err != nil {
		s.m.loginFailures.Add(1)
		writeError(w, http.StatusUnauthorized, keycast.MsgOAuthUnauthorized, "")
		return
	}
	sealed, err := s.store.PersonalKey(ctx, u.Pubkey)
	if err != nil {
		s.authFail(w, err)
		return
	}
	signer, err := s.openUserKey(sealed, u.Pubkey)
	if err != nil {
		s.authFail(w, err)
		return
	}
	tok, err := s.mintSession(signer, tenantID, u.Email, origin, nil, s.cfg.Now())
	if err != nil {
		s.authFail(w, err)
		return
	}
	s.m.logins.Add(1)
	w.Header().Add("Set-Cookie", s.sessionCookie(tok))
	writeJSON(w, http.StatusOK, keycast.RegisterResponse{Success: true, Pubkey: u.Pubkey})
}

// serveRevoke is POST /api/user/sessions/revoke {"bunker_pubkey"}: a session (cookie or bearer)
// revokes one of the user's authorizations; an access token may revoke only its own. Cached
// handlers of a revoked authorization stop working at once in this process.
func (s *Server) serveRevoke(w http.ResponseWriter, r *http.Request, tenantID int64) {
	who, err := s.callerFromRequest(r, 0)
	if err != nil {
		if errors.Is(err, keycast.ErrMissingBearer) {
			writeError(w, http.StatusUnauthorized, keycast.MsgAuthRequired, "")
		} else {
			writeError(w, http.StatusUnauthorized, keycast.MsgInvalidToken, "")
		}
		return
	}
	var req struct {
		BunkerPubkey string `json:"bunker_pubkey"`
	}
	if err := s.decodeJSON(r, &req, "bunker_pubkey"); err != nil {
		writeBodyError(w, err)
		return
	}
	bunker := strings.ToLower(req.BunkerPubkey)
	if !who.session && (who.bunker == "" || bunker != strings.ToLower(who.bunker)) {
		// An access token may log itself out, nothing more.
		writeError(w, http.StatusUnauthorized, keycast.MsgInvalidToken, "")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), authTimeout)
	defer cancel()
	ids, err := s.store.RevokeAuthorizations(ctx, tenantID, who.user.Hex(), bunker, s.cfg.Now())
	if errors.Is(err, keycaststore.ErrNotFound) {
		writeError(w, http.StatusUnauthorized, keycast.MsgInvalidToken, "")
		return
	}
	if err != nil {
		s.authFail(w, err)
		return
	}
	s.evictRevoked(ids)
	writeJSON(w, http.StatusOK, struct {
		Success bool   `json:"success"`
		Message string `json:"message"`
	}{true, msgSessionRevoked})
}

// evictRevoked counts revocations and drops the authorizations' cached handlers.
func (s *Server) evictRevoked(ids []int64) {
	s.m.oauthRevoked.Add(uint64(len(ids)))
	n := s.cache.revoke(ids, s.cfg.Now().UnixNano())
	s.m.revokedEvictions.Add(float64(n))
}

// caller is who sent an account request: the user, and whether the credential is a session.
type caller struct {
	user keycast.PublicKey
	// session: a session token (register and login mint them: user-signed, no bunker_pubkey),
	// which acts for the user. Anything else is an access token, which acts only for its own
	// authorization, bunker.
	session bool
	bunker  string
}

// callerFromRequest validates the bearer token, else the session cookie (tenant 0 skips the
// tenant check). An access token passes validation too; callers must check session before
// letting it act for the user, so a limited token can never be turned into a wider one.
func (s *Server) callerFromRequest(r *http.Request, tenant int64) (caller, error) {
	authz := r.Header.Get("Authorization")
	if !strings.HasPrefix(authz, "Bearer ") {
		c, err := r.Cookie(keycast.SessionCookieName)
		if err != nil || c.Value == "" {
			return caller{}, keycast.ErrMissingBearer
		}
		authz = "Bearer " + c.Value
	}
	u, err := s.validate(r.Context(), authz, tenant)
	if err != nil {
		return caller{}, err
	}
	return caller{
		user:    u.Audience,
		session: u.SelfIssued() && u.Facts.BunkerPubkey == "",
		bunker:  u.Facts.BunkerPubkey,
	}, nil
}

// validate runs ValidateBearer (a Schnorr verification) under the CPU gate.
func (s *Server) validate(ctx context.Context, authz string, tenant int64) (*keycast.UCAN, error) {
	release, err := s.acquireCPU(ctx, time.Time{})
	if err != nil {
		return nil, err
	}
	defer release()
	return keycast.ValidateBearer(authz, keycast.ValidateOptions{Now: s.cfg.Now(), ServerPubkey: s.serverPub, ExpectedTenant: tenant})
}

// mintSession mints the user-signed session token of register and login.
func (s *Server) mintSession(signer *keycast.Signer, tenantID int64, email, origin string, relays []string, now time.Time) (string, error) {
	return keycast.MintUCAN(signer, signer.Public(), keycast.Facts{
		TenantID: keycast.Int64(tenantID), Email: email, RedirectOrigin: origin, Relays: relays,
	}, s.cfg.TokenLifetime, now)
}

// bcryptHash hashes a password under the CPU gate.
func (s *Server) bcryptHash(ctx context.Context, password string) ([]byte, error) {
	release, err := s.acquireCPU(ctx, time.Time{})
	if err != nil {
		return nil, err
	}
	defer release()
	return bcrypt.GenerateFromPassword([]byte(password), s.cfg.BcryptCost)
}

// openUserKey decrypts a sealed personal key and checks it belongs to pubkeyHex.
func (s *Server) openUserKey(sealed []byte, pubkeyHex string) (*keycast.Signer, error) {
	plain, err := keycast.OpenWith(s.aead, sealed)
	if err != nil {
		return nil, err
	}
	defer clear(plain)
	if len(plain) != 32 {
		return nil, errors.New("keycastserver: personal key is not 32 bytes")
	}
	signer, err := keycast.NewSignerChecked(keycast.SecretKey(plain))
	if err != nil {
		return nil, err
	}
	if signer.Public().Hex() != pubkeyHex {
		return nil, errors.New("keycastserver: personal key does not belong to its user (wrong master key?)")
	}
	return signer, nil
}

// authFail answers the auth endpoints' server-side failures: admission rejection keeps its
// contract; everything else is Keycast's 503 "Service temporarily unavailable".
func (s *Server) authFail(w http.ResponseWriter, err error) {
	if errors.Is(err, errRejected) {
		writeAdmissionRejected(w)
		return
	}
	s.log.Error("auth request failed", "err", err)
	writeError(w, http.StatusServiceUnavailable, keycast.MsgServiceUnavailable, "")
}

// normalizeEmail checks the shape of an address and returns it trimmed and lower-cased, so
// that case variants are one account (the unique index compares stored text). problem, when not
// empty, says what is wrong for the 400 answer. The rules are a practical subset of RFC 5321
// (dot-atom local part without quoting, host-name domain, IDN labels as UTF-8): exactly one @,
// no control characters, spaces or <>()[]\,;:", at most 64 bytes before the @ and 254 in all.
func normalizeEmail(raw string) (email, problem string) {
	e := strings.TrimSpace(raw)
	switch {
	case !utf8.ValidString(e):
		return "", "it is not valid UTF-8"
	case len(e) > maxEmailBytes:
		return "", "it is longer than 254 bytes"
	}
	for _, r := range e {
		switch {
		case unicode.IsControl(r):
			return "", "it contains a control character"
		case unicode.IsSpace(r):
			return "", "it contains a space"
		case strings.ContainsRune(`<>()[]\,;:"`, r):
			return "", "it contains " + strconv.QuoteRune(r) + ", which is not allowed"
		}
	}
	if strings.Count(e, "@") != 1 {
		return "", "it must contain exactly one @"
	}
	local, domain, _ := strings.Cut(e, "@")
	switch {
	case local == "":
		return "", "nothing before the @"
	case len(local) > 64:
		return "", "more than 64 bytes before the @"
	case local[0] == '.' || local[len(local)-1] == '.' || strings.Contains(local, ".."):
		return "", "a dot may not start or end the part before the @, nor follow another dot"
	case domain == "":
		return "", "nothing after the @"
	}
	for _, label := range strings.Split(domain, ".") {
		if label == "" || label[0] == '-' || label[len(label)-1] == '-' || len(label) > 63 {
			return "", "the domain " + strconv.Quote(domain) + " is not a host name (empty label, or one that starts or ends with -)"
		}
		for _, r := range label {
			if r < utf8.RuneSelf && !(r == '-' || '0' <= r && r <= '9' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z') {
				return "", "the domain " + strconv.Quote(domain) + " is not a host name (letters, digits, - and dots only)"
			}
		}
	}
	return strings.ToLower(e), ""
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// randomAlnum returns n characters from [A-Za-z0-9], uniformly (rejection sampling).
func randomAlnum(n int) string {
	out := make([]byte, 0, n)
	var buf [64]byte
	for len(out) < n {
		rand.Read(buf[:])
		for _, c := range buf {
			if c < 248 { // 248 = 62*4
				out = append(out, alnum[c%62])
				if len(out) == n {
					break
				}
			}
		}
	}
	return string(out)
}
