package keycast

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// HTTP paths of the Keycast API (docs/protocol-keycast.md, Server API).
const (
	PathRegister  = "/api/auth/register"
	PathLogin     = "/api/auth/login"
	PathAuthorize = "/api/oauth/authorize"
	PathToken     = "/api/oauth/token"
	PathNostr     = "/api/nostr"
	PathMetrics   = "/api/metrics"
	PathPolicies  = "/api/policies"
	PathHealth    = "/health"
	PathStartup   = "/healthz/startup"
	PathReady     = "/healthz/ready"
)

// Session cookie set by register (Dec-2025 server) and read by authorize.
const (
	SessionCookieName = "keycast_session"
	// SessionCookieAttributes follow "keycast_session=<ucan>; " in Set-Cookie.
	SessionCookieAttributes = "HttpOnly; Secure; SameSite=Lax; Path=/; Max-Age=86400"
)

// Values the load tool sends during setup (docs/protocol-keycast.md, setup,
// Authorize and Token exchange).
const (
	LoadtestClientID           = "loadtest"
	LoadtestScope              = "policy:social"
	LoadtestRedirectPath       = "/callback"
	GrantTypeAuthorizationCode = "authorization_code"
	TokenTypeBearer            = "Bearer"
	// TokenExpiresIn is expires_in of the token response, in seconds.
	TokenExpiresIn = 86400
	// DefaultBunkerRelays is the default of env BUNKER_RELAYS, used in bunker_url.
	DefaultBunkerRelays = "wss://relay.divine.video,wss://relay.primal.net,wss://relay.nsec.app,wss://nos.lol"
	// AuthorizationRelaysJSON is what the token endpoint stores in
	// oauth_authorizations.relays.
	AuthorizationRelaysJSON = `["wss://relay.damus.io"]`
	// LoadtestDBRelaysJSON is what DB-mode setup stores instead.
	LoadtestDBRelaysJSON = `["wss://relay.example.com"]`
	// LoadtestTenantDomain and LoadtestTenantName are DB-mode setup's tenant.
	LoadtestTenantDomain = "loadtest.keycast.local"
	LoadtestTenantName   = "Load Test Tenant"
	// LoadtestRedirectOrigin is the redirect_origin fact of DB-mode tokens.
	LoadtestRedirectOrigin = "http://loadtest.keycast.local"
	// LoadtestPasswordHash is DB-mode setup's placeholder bcrypt hash.
	LoadtestPasswordHash = "$2b$12$loadtest.placeholder.hash"
	// SignEventContentPrefix precedes the unix time in sign-event content.
	SignEventContentPrefix = "Load test "
	// NIP44TestPlaintext is the nip44-encrypt plaintext of the load tool.
	NIP44TestPlaintext = "test message for load testing"
	// DefaultTenantID is the tenant seeded by the migration (domain "default").
	DefaultTenantID = 1
)

// Error codes and the admission contract (docs/protocol-keycast.md, Admission
// contract; upstream defines no body, so this one is loadproof's). Intentional
// shedding is HTTP 503 with body
// {"error":AdmissionRejectedMessage,"code":CodeAdmissionRejected}; rate
// limiting is HTTP 429 with code CodeRateLimited and a Retry-After header.
const (
	CodeAdmissionRejected    = "admission_rejected"
	CodeRateLimited          = "rate_limited"
	AdmissionRejectedMessage = "server at capacity, retry shortly"
)

// Error messages Keycast sends, as data (docs/protocol-keycast.md, Server API).
const (
	MsgAuthRequired        = "Authentication required. Please provide a valid token."
	MsgInvalidToken        = "Invalid or expired token. Please log in again."
	MsgPolicyDenied        = "Operation denied by policy"
	MsgServiceUnavailable  = "Service temporarily unavailable. Please try again in a few minutes."
	MsgOAuthUnauthorized   = "Invalid email or password. Please check your credentials and try again."
	MsgOriginRequired      = "Origin header required"
	MsgMissingHost         = "Missing Host header"
	MsgInvalidRequest      = "Invalid request: " // prefix of OAuth 400 messages
	MsgRedirectURIMismatch = "Invalid request: redirect_uri mismatch"
	MsgUnsupportedMethod   = "Unsupported method: " // prefix, then the method name
	MsgMissingEvent        = "Missing event parameter"
	MsgMissingRecipient    = "Missing recipient pubkey parameter"
	MsgMissingSender       = "Missing sender pubkey parameter"
	MsgMissingPlaintext    = "Missing plaintext parameter"
	MsgMissingCiphertext   = "Missing ciphertext parameter"
	MsgInvalidPubkey       = "Invalid pubkey: " // prefix, then the detail
	MsgAccountRestricted   = "Account restricted"
	MsgDatabaseUnavailable = "Database temporarily unavailable"
	MsgRPCTimeout          = "RPC request timed out after 8s"
	MsgPasswordBusy        = "Password service is busy. Please try again shortly."
	// Client-side failure texts of the load tool's setup.
	MsgNoSessionToken  = "No session token in response"
	MsgNoAccessToken   = "No access_token in response"
	MsgTokenExchange   = "OAuth token exchange failed: " // prefix, then the body
	MsgNoUsersCreated  = "Failed to create any users"
	MsgParseResponse   = "Failed to parse response: " // prefix, then the error
	MsgCapacityNotPass = "one or more capacity phases exceeded their predeclared limits"
)

// RegisterRequest is the body of POST /api/auth/register.
type RegisterRequest struct {
	Email    string   `json:"email"`
	Password string   `json:"password"`
	Nsec     *string  `json:"nsec,omitempty"`
	Relays   []string `json:"relays,omitempty"`
}

// RegisterResponse is the 200 body of register.
type RegisterResponse struct {
	Success bool   `json:"success"`
	Pubkey  string `json:"pubkey"`
}

// AuthorizeRequest is the body of POST /api/oauth/authorize.
type AuthorizeRequest struct {
	Approved            bool    `json:"approved"`
	ClientID            string  `json:"client_id"`
	RedirectURI         string  `json:"redirect_uri"`
	Scope               string  `json:"scope"`
	CodeChallenge       *string `json:"code_challenge,omitempty"`
	CodeChallengeMethod *string `json:"code_challenge_method,omitempty"`
}

// AuthorizeResponse is the 200 body of authorize.
type AuthorizeResponse struct {
	Code        string `json:"code"`
	RedirectURI string `json:"redirect_uri"`
}

// TokenRequest is the body of POST /api/oauth/token. GrantType defaults to
// GrantTypeAuthorizationCode.
type TokenRequest struct {
	GrantType    *string `json:"grant_type,omitempty"`
	Code         string  `json:"code"`
	ClientID     string  `json:"client_id"`
	RedirectURI  string  `json:"redirect_uri"`
	CodeVerifier *string `json:"code_verifier,omitempty"`
}

// TokenResponse is the 200 body of the token endpoint.
type TokenResponse struct {
	BunkerURL           string      `json:"bunker_url"`
	AccessToken         string      `json:"access_token,omitempty"`
	TokenType           string      `json:"token_type"`
	ExpiresIn           int64       `json:"expires_in"`
	Scope               string      `json:"scope"`
	Policy              *PolicyInfo `json:"policy,omitempty"`
	AuthorizationHandle string      `json:"authorization_handle"`
}

// PolicyInfo describes a policy in the token response and GET /api/policies.
type PolicyInfo struct {
	Slug        string              `json:"slug"`
	DisplayName string              `json:"display_name"`
	Description string              `json:"description"`
	Permissions []PermissionDisplay `json:"permissions"`
}

// PermissionDisplay is the user-facing description of one permission.
type PermissionDisplay struct {
	Icon        string `json:"icon"`
	Title       string `json:"title"`
	Description string `json:"description"`
}

// RPCRequest is the body of POST /api/nostr; Params defaults to [].
type RPCRequest struct {
	Method string            `json:"method"`
	Params []json.RawMessage `json:"params"`
}

// RPCResponse is the body of every /api/nostr response: exactly one of
// Result (success, HTTP 200) and Error is set.
type RPCResponse struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// ErrorBody is the JSON error body of the auth and OAuth endpoints and of
// shedding responses; Code is set for coded errors such as
// CodeAdmissionRejected.
type ErrorBody struct {
	Error string `json:"error"`
	Code  string `json:"code,omitempty"`
}

// RPC method names of /api/nostr.
const (
	RPCGetPublicKey = "get_public_key"
	RPCSignEvent    = "sign_event"
	RPCNIP44Encrypt = "nip44_encrypt"
	RPCNIP44Decrypt = "nip44_decrypt"
	RPCNIP04Encrypt = "nip04_encrypt"
	RPCNIP04Decrypt = "nip04_decrypt"
)

// AppendRPCBody appends the exact /api/nostr body the load tool sends for m
// (docs/protocol-keycast.md, RPC request bodies): get-public-key has no
// params; sign-event sends a kind-1 event object with keys in sorted order
// and content "Load test <unixNow>"; nip44-encrypt sends recipientHex and
// NIP44TestPlaintext. register is not an RPC.
func AppendRPCBody(dst []byte, m Method, userPubkeyHex string, unixNow int64, recipientHex string) ([]byte, error) {
	switch m {
	case MethodGetPublicKey:
		return append(dst, `{"method":"get_public_key","params":[]}`...), nil
	case MethodSignEvent:
		dst = append(dst, `{"method":"sign_event","params":[{"content":"`...)
		dst = append(dst, SignEventContentPrefix...)
		dst = strconv.AppendInt(dst, unixNow, 10)
		dst = append(dst, `","created_at":`...)
		dst = strconv.AppendInt(dst, unixNow, 10)
		dst = append(dst, `,"kind":1,"pubkey":`...)
		dst = appendJSONString(dst, userPubkeyHex)
		return append(dst, `,"tags":[]}]}`...), nil
	case MethodNIP44Encrypt:
		dst = append(dst, `{"method":"nip44_encrypt","params":[`...)
		dst = appendJSONString(dst, recipientHex)
		dst = append(dst, ',')
		dst = appendJSONString(dst, NIP44TestPlaintext)
		return append(dst, `]}`...), nil
	default:
		return dst, fmt.Errorf("keycast: method %q has no /api/nostr body; want sign-event, get-public-key or nip44-encrypt", string(m))
	}
}

// AppendErrorJSON appends {"error":msg} or {"error":msg,"code":code}.
func AppendErrorJSON(dst []byte, msg, code string) []byte {
	dst = append(dst, `{"error":`...)
	dst = appendJSONString(dst, msg)
	if code != "" {
		dst = append(dst, `,"code":`...)
		dst = appendJSONString(dst, code)
	}
	return append(dst, '}')
}

// AppendJSONString appends s as a JSON string with serde_json escaping (no
// HTML escaping), for handlers that build responses by hand.
func AppendJSONString(dst []byte, s string) []byte { return appendJSONString(dst, s) }
