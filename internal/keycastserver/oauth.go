package keycastserver

import (
	"context"
	"errors"
	"github.com/loadproof/loadproof/internal/textclip"
	"net/http"
	"net/url"
	"time"

	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/keycaststore"
)

const (
	// codeLifetime is how long an authorization code can be exchanged.
	codeLifetime = 10 * time.Minute
	// handleLifetime is the validity of authorization_handle (silent re-auth).
	handleLifetime = 30 * 24 * time.Hour
)

// oauthError answers Keycast's OAuthError: 401 unauthorized, 400 "Invalid request: …", 503
// for database and encryption failures; admission rejection keeps its own contract.
func (s *Server) oauthError(w http.ResponseWriter, status int, detail string) {
	switch status {
	case http.StatusUnauthorized:
		writeError(w, status, keycast.MsgOAuthUnauthorized, "")
	case http.StatusBadRequest:
		writeError(w, status, keycast.MsgInvalidRequest+detail, "")
	default:
		writeError(w, http.StatusServiceUnavailable, keycast.MsgServiceUnavailable, "")
	}
}

func (s *Server) oauthFail(w http.ResponseWriter, err error) {
	if errors.Is(err, errRejected) {
		writeAdmissionRejected(w)
		return
	}
	s.log.Error("oauth request failed", "err", err)
	s.oauthError(w, http.StatusServiceUnavailable, "")
}

// serveAuthorize is POST /api/oauth/authorize: the logged-in user (a session token, as cookie
// or bearer; never an access token) approves a client; the answer is a single-use code valid
// for 10 minutes.
func (s *Server) serveAuthorize(w http.ResponseWriter, r *http.Request, tenantID int64) {
	var req keycast.AuthorizeRequest
	if err := s.decodeJSON(r, &req, "approved", "client_id", "redirect_uri", "scope"); err != nil {
		writeBodyError(w, err)
		return
	}
	if !req.Approved {
		s.serveDenied(w, r, req.RedirectURI)
		return
	}
	who, err := s.callerFromRequest(r, tenantID)
	if err != nil {
		if errors.Is(err, errRejected) {
			writeAdmissionRejected(w)
			return
		}
		s.oauthError(w, http.StatusUnauthorized, "")
		return
	}
	if !who.session {
		// An access token is not a login: accepting it here would let a policy:social token
		// approve itself a policy:full one (upstream accepts it; docs/upstream-differences.md).
		s.oauthError(w, http.StatusUnauthorized, "")
		return
	}
	user := who.user
	method := ""
	challenge := ""
	if req.CodeChallenge != nil {
		challenge = *req.CodeChallenge
		if req.CodeChallengeMethod != nil {
			method = *req.CodeChallengeMethod
		}
		if method != "" && method != keycast.PKCEPlain && method != keycast.PKCES256 {
			s.oauthError(w, http.StatusBadRequest, "unsupported code_challenge_method "+textclip.String(method, 40)+"; use S256 or plain")
			return
		}
	}
	now := s.cfg.Now()
	code := randomAlnum(32)
	ctx, cancel := context.WithTimeout(r.Context(), authTimeout)
	defer cancel()
	err = s.store.CreateCode(ctx, keycaststore.Code{
		Code: code, TenantID: tenantID, UserPubkey: user.Hex(), ClientID: req.ClientID, RedirectURI: req.RedirectURI,
		Scope: req.Scope, CodeChallenge: challenge, CodeChallengeMethod: method, ExpiresAt: now.Add(codeLifetime), CreatedAt: now,
	})
	if err != nil {
		s.oauthFail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, keycast.AuthorizeResponse{Code: code, RedirectURI: req.RedirectURI})
}

// serveDenied answers a denied approval with a redirect to redirect_uri?error=access_denied, but
// only when redirect_uri passes the rules a code's redirect_uri must pass at the token exchange
// (keycast.OriginOf: https, or http for a local host). Upstream redirects to whatever it is given,
// javascript: included; here anything else is a 400 naming the problem.
func (s *Server) serveDenied(w http.ResponseWriter, r *http.Request, redirectURI string) {
	if _, err := keycast.OriginOf(redirectURI); err != nil {
		s.oauthError(w, http.StatusBadRequest, err.Error())
		return
	}
	u, err := url.Parse(redirectURI)
	if err != nil { // OriginOf parsed it already
		s.oauthError(w, http.StatusBadRequest, "Invalid redirect_uri")
		return
	}
	// The parameter goes into the query, before any fragment.
	if u.RawQuery != "" {
		u.RawQuery += "&"
	}
	u.RawQuery += "error=access_denied"
	http.Redirect(w, r, u.String(), http.StatusSeeOther)
}

// serveToken is POST /api/oauth/token: exchange a code (PKCE checked) for an access token
// bound to a new authorization with a derived bunker key.
func (s *Server) serveToken(w http.ResponseWriter, r *http.Request, tenantID int64) {
	var req keycast.TokenRequest
	if err := s.decodeJSON(r, &req, "code", "client_id", "redirect_uri"); err != nil {
		writeBodyError(w, err)
		return
	}
	if req.GrantType != nil && *req.GrantType != keycast.GrantTypeAuthorizationCode {
		s.oauthError(w, http.StatusBadRequest, "Invalid grant_type '"+textclip.String(*req.GrantType, 40)+"'. This endpoint only accepts 'authorization_code'.")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), authTimeout)
	defer cancel()
	now := s.cfg.Now()
	code, err := s.store.CodeByValue(ctx, tenantID, req.Code, now)
	if errors.Is(err, keycaststore.ErrNotFound) {
		s.oauthError(w, http.StatusUnauthorized, "")
		return
	}
	if err != nil {
		s.oauthFail(w, err)
		return
	}
	if code.RedirectURI != req.RedirectURI {
		writeError(w, http.StatusBadRequest, keycast.MsgRedirectURIMismatch, "")
		return
	}
	if code.ClientID != req.ClientID {
		s.oauthError(w, http.StatusBadRequest, "client_id mismatch")
		return
	}
	if code.CodeChallenge != "" {
		verifier := ""
		if req.CodeVerifier != nil {
			verifier = *req.CodeVerifier
		}
		if err := keycast.VerifyPKCE(code.CodeChallengeMethod, code.CodeChallenge, verifier); err != nil {
			s.oauthError(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	redirectOrigin, err := keycast.OriginOf(req.RedirectURI)
	if err != nil {
		s.oauthError(w, http.StatusBadRequest, err.Error())
		return
	}
	slug, err := keycast.ParseScope(code.Scope)
	if err != nil {
		s.oauthError(w, http.StatusBadRequest, err.Error())
		return
	}
	policy, ok := s.policies[slug]
	if !ok {
		s.oauthError(w, http.StatusBadRequest, "Unknown policy '"+textclip.String(slug, 50)+"'. Use GET /api/policies for available options.")
		return
	}
	// Take the CPU slot (key derivation and token signing) before consuming the code: a request
	// shed here is told to retry, and its retry must find the code still valid.
	release, err := s.acquireCPU(ctx, time.Time{})
	if err != nil {
		s.oauthFail(w, err)
		return
	}
	released := false
	defer func() {
		if !released {
			release()
		}
	}()
	// Single use: only the exchange that deletes the row goes on.
	if err := s.store.DeleteCode(ctx, tenantID, req.Code); err != nil {
		if errors.Is(err, keycaststore.ErrCodeUsed) {
			s.oauthError(w, http.StatusUnauthorized, "")
			return
		}
		s.oauthFail(w, err)
		return
	}
	user, err := s.store.UserByPubkey(ctx, code.UserPubkey)
	if err != nil {
		if errors.Is(err, keycaststore.ErrNotFound) {
			s.oauthError(w, http.StatusUnauthorized, "")
			return
		}
		s.oauthFail(w, err)
		return
	}
	sealed, err := s.store.PersonalKey(ctx, code.UserPubkey)
	if errors.Is(err, keycaststore.ErrNotFound) {
		s.oauthError(w, http.StatusBadRequest, "Personal keys not found for this user")
		return
	}
	if err != nil {
		s.oauthFail(w, err)
		return
	}
	secret := randomAlnum(48)
	tok, bunkerPub, err := s.mintAccess(sealed, user, tenantID, redirectOrigin, secret, now)
	release()
	released = true
	if err != nil {
		s.oauthFail(w, err)
		return
	}
	handle := randomHex(32)
	_, err = s.store.CreateAuthorization(ctx, keycaststore.Authorization{
		TenantID: tenantID, UserPubkey: user.Pubkey, RedirectOrigin: redirectOrigin, ClientID: req.ClientID,
		BunkerPubkey: bunkerPub.Hex(), Secret: secret, Relays: keycast.AuthorizationRelaysJSON, PolicyID: policy.id,
		Handle: handle, HandleExpiresAt: now.Add(handleLifetime), CreatedAt: now,
	})
	if err != nil {
		s.oauthFail(w, err)
		return
	}
	s.m.oauthCreated.Add(1)
	if code.PreviousAuthID != 0 {
		if err := s.store.RevokeAuthorizationByID(ctx, code.PreviousAuthID, now); err != nil {
			s.log.Warn("revoking the previous authorization failed", "id", code.PreviousAuthID, "err", err)
		} else {
			s.evictRevoked([]int64{code.PreviousAuthID})
		}
	}
	info := policy.info
	writeJSON(w, http.StatusOK, keycast.TokenResponse{
		BunkerURL:           "bunker://" + bunkerPub.Hex() + "?" + s.bunkerRelayQuery + "&secret=" + secret,
		AccessToken:         tok,
		TokenType:           keycast.TokenTypeBearer,
		ExpiresIn:           int64(s.cfg.TokenLifetime / time.Second),
		Scope:               code.Scope,
		Policy:              &info,
		AuthorizationHandle: handle,
	})
}

// mintAccess decrypts the user key, derives the bunker key and mints the server-signed access
// token.
func (s *Server) mintAccess(sealed []byte, user keycaststore.User, tenantID int64, redirectOrigin, secret string, now time.Time) (string, keycast.PublicKey, error) {
	signer, err := s.openUserKey(sealed, user.Pubkey)
	if err != nil {
		return "", keycast.PublicKey{}, err
	}
	bunker, err := keycast.DeriveBunkerKey(signer.SecretKey(), secret)
	if err != nil {
		return "", keycast.PublicKey{}, err
	}
	bunkerPub := bunker.Public()
	tok, err := keycast.MintUCAN(s.serverSigner, signer.Public(), keycast.Facts{
		TenantID: keycast.Int64(tenantID), Email: user.Email, RedirectOrigin: redirectOrigin, BunkerPubkey: bunkerPub.Hex(),
	}, s.cfg.TokenLifetime, now)
	return tok, bunkerPub, err
}
