package keycast

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/loadproof/loadproof/internal/textclip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/btcsuite/btcd/btcec/v2"
)

// UCAN constants as Keycast (rs-ucan 0.7.0-alpha.1) writes them.
const (
	UCANAlgorithm = "SchnorrSecp256k1"
	UCANType      = "JWT"
	UCANVersion   = "0.9.0-canary"
	// UCANHeaderJSON is the exact DAG-JSON header: sorted keys, no spaces.
	UCANHeaderJSON = `{"alg":"SchnorrSecp256k1","typ":"JWT","ucv":"0.9.0-canary"}`
	// MaxUCANSize caps the token string ParseUCAN accepts.
	MaxUCANSize = 16 << 10
	// DefaultTokenLifetime is Keycast's access and session token lifetime.
	DefaultTokenLifetime = 24 * time.Hour
)

// Names of the facts Keycast reads and writes.
const (
	FactTenantID       = "tenant_id"
	FactEmail          = "email"
	FactRedirectOrigin = "redirect_origin"
	FactBunkerPubkey   = "bunker_pubkey"
	FactRelays         = "relays"
)

var ucanHeaderB64 = base64.RawURLEncoding.EncodeToString([]byte(UCANHeaderJSON))

var b64 = base64.RawURLEncoding.Strict()

// Facts is the single fact object Keycast puts in a UCAN's "fct" array.
// Access tokens carry tenant_id, email, redirect_origin and bunker_pubkey;
// session tokens carry tenant_id, email, redirect_origin and optionally
// relays. Empty BunkerPubkey and nil Relays/TenantID are left out of the
// token; Email and RedirectOrigin are always written. Extra holds any other
// facts (written with sorted keys, compact; read back as found).
type Facts struct {
	TenantID       *int64
	Email          string
	RedirectOrigin string
	BunkerPubkey   string
	Relays         []string
	Extra          map[string]json.RawMessage

	// hasRedirectOrigin records, for parsed tokens, whether the fact was
	// present at all (Keycast requires presence, not a particular value).
	hasRedirectOrigin bool
}

// HasRedirectOrigin reports whether the redirect_origin fact is present: for
// a parsed token, whether the token carried it; for a Facts built in code,
// whether RedirectOrigin is non-empty.
func (f *Facts) HasRedirectOrigin() bool { return f.hasRedirectOrigin || f.RedirectOrigin != "" }

// Int64 returns a pointer to v, for Facts.TenantID literals.
func Int64(v int64) *int64 { return &v }

// UCAN is a parsed token. ParseUCAN fills every field; Verify checks the
// signature over SignedData.
type UCAN struct {
	Issuer      PublicKey
	Audience    PublicKey
	IssuerDID   string
	AudienceDID string
	Exp         int64
	Nbf         *int64
	Nonce       string
	Facts       Facts
	// SignedData is "<header_b64>.<payload_b64>" exactly as in the token.
	SignedData string
	Signature  [64]byte
	// Token is the whole token string.
	Token string

	// issuerPoint caches lift_x(pointFor) from ParseUCAN; Verify uses it only
	// while Issuer still equals pointFor.
	issuerPoint btcec.JacobianPoint
	pointFor    PublicKey
	havePoint   bool
}

// Verify checks the BIP-340 signature of SHA-256(SignedData) by the issuer.
func (u *UCAN) Verify() error {
	h := sha256.Sum256([]byte(u.SignedData))
	p := u.issuerPoint
	if !u.havePoint || u.pointFor != u.Issuer {
		var ok bool
		if p, ok = liftX(&u.Issuer); !ok {
			return ErrBadSignature
		}
	}
	if !verifySchnorrPoint(&u.Issuer, &p, h[:], &u.Signature) {
		return ErrBadSignature
	}
	return nil
}

// UserPubkey is the audience: Keycast takes the user's key from aud.
func (u *UCAN) UserPubkey() PublicKey { return u.Audience }

// SelfIssued reports whether the token is user-signed (iss == aud), as
// session tokens are.
func (u *UCAN) SelfIssued() bool { return u.Issuer == u.Audience }

// MintUCAN returns a Keycast token signed by s (the issuer) for audience, with
// exp = now + lifetime (whole seconds) and one fact object. Signing is
// deterministic (no aux randomness), as Keycast's is.
func MintUCAN(s *Signer, audience PublicKey, facts Facts, lifetime time.Duration, now time.Time) (string, error) {
	if s == nil {
		return "", errors.New("keycast: MintUCAN needs a signer; NewSigner returned nil for an invalid key")
	}
	exp := now.Unix() + int64(lifetime/time.Second)
	if exp < 0 {
		return "", fmt.Errorf("keycast: token expiry %d is negative; check now and lifetime", exp)
	}
	payload := make([]byte, 0, 512)
	payload = append(payload, `{"att":[],"aud":`...)
	payload = appendJSONString(payload, DIDKey(audience))
	payload = append(payload, `,"exp":`...)
	payload = strconv.AppendInt(payload, exp, 10)
	payload = append(payload, `,"fct":[`...)
	var err error
	if payload, err = appendFacts(payload, &facts); err != nil {
		return "", err
	}
	payload = append(payload, `],"iss":`...)
	payload = appendJSONString(payload, DIDKey(s.Public()))
	payload = append(payload, `,"prf":[]}`...)

	tok := make([]byte, 0, len(ucanHeaderB64)+1+b64.EncodedLen(len(payload))+1+86)
	tok = append(tok, ucanHeaderB64...)
	tok = append(tok, '.')
	tok = b64.AppendEncode(tok, payload)
	h := sha256.Sum256(tok)
	sig, err := s.Sign(h)
	if err != nil {
		return "", err
	}
	tok = append(tok, '.')
	tok = b64.AppendEncode(tok, sig[:])
	return string(tok), nil
}

// appendFacts writes the fact object with keys in byte order.
func appendFacts(dst []byte, f *Facts) ([]byte, error) {
	type kv struct {
		k string
		v []byte
	}
	fields := make([]kv, 0, 5+len(f.Extra))
	if f.BunkerPubkey != "" {
		fields = append(fields, kv{FactBunkerPubkey, appendJSONString(nil, f.BunkerPubkey)})
	}
	fields = append(fields, kv{FactEmail, appendJSONString(nil, f.Email)})
	fields = append(fields, kv{FactRedirectOrigin, appendJSONString(nil, f.RedirectOrigin)})
	if f.Relays != nil {
		v := []byte{'['}
		for i, r := range f.Relays {
			if i > 0 {
				v = append(v, ',')
			}
			v = appendJSONString(v, r)
		}
		fields = append(fields, kv{FactRelays, append(v, ']')})
	}
	if f.TenantID != nil {
		fields = append(fields, kv{FactTenantID, strconv.AppendInt(nil, *f.TenantID, 10)})
	}
	for k, raw := range f.Extra {
		switch k {
		case FactBunkerPubkey, FactEmail, FactRedirectOrigin, FactRelays, FactTenantID:
			return dst, fmt.Errorf("keycast: fact %q is in Facts.Extra but has its own field; set the field instead", k)
		}
		v, err := canonicalJSON(nil, raw)
		if err != nil {
			return dst, fmt.Errorf("keycast: fact %q: %w", k, err)
		}
		fields = append(fields, kv{k, v})
	}
	slices.SortFunc(fields, func(a, b kv) int { return strings.Compare(a.k, b.k) })
	dst = append(dst, '{')
	for i, e := range fields {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, e.k)
		dst = append(dst, ':')
		dst = append(dst, e.v...)
	}
	return append(dst, '}'), nil
}

type ucanHeaderWire struct {
	Alg *string `json:"alg"`
	Typ *string `json:"typ"`
	Ucv *string `json:"ucv"`
}

type ucanPayloadWire struct {
	Iss *string          `json:"iss"`
	Aud *string          `json:"aud"`
	Exp *json.RawMessage `json:"exp"`
	Nbf *json.RawMessage `json:"nbf"`
	Nnc *string          `json:"nnc"`
	Att *json.RawMessage `json:"att"`
	Fct *json.RawMessage `json:"fct"`
	Prf *json.RawMessage `json:"prf"`
}

// ErrMalformedToken is the class of ParseUCAN errors; errors.Is matches it.
var ErrMalformedToken = errors.New("keycast: malformed UCAN token")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformedToken, fmt.Sprintf(format, args...))
}

// ParseUCAN parses a token strictly: at most MaxUCANSize bytes; three
// base64url (no padding) parts; a header object whose alg, typ and ucv are
// present and equal to UCANAlgorithm, UCANType and UCANVersion; a payload
// object with iss and aud (Keycast did:keys), exp (unsigned integer), att and
// prf (arrays) and fct (array of facts); optional nbf (unsigned integer) and
// nnc (string); a 64-byte signature. It does not verify the signature; see
// Verify and ValidateBearer.
func ParseUCAN(token string) (*UCAN, error) {
	if len(token) > MaxUCANSize {
		return nil, malformed("token is %d bytes; the limit is %d", len(token), MaxUCANSize)
	}
	d1 := strings.IndexByte(token, '.')
	if d1 < 0 {
		return nil, malformed("token has 1 part; want header.payload.signature")
	}
	d2 := strings.IndexByte(token[d1+1:], '.')
	if d2 < 0 {
		return nil, malformed("token has 2 parts; want header.payload.signature")
	}
	d2 += d1 + 1
	if strings.IndexByte(token[d2+1:], '.') >= 0 {
		return nil, malformed("token has more than 3 parts; want header.payload.signature")
	}
	hb, pb, sb := token[:d1], token[d1+1:d2], token[d2+1:]

	u := &UCAN{Token: token, SignedData: token[:d2]}

	header, err := b64.DecodeString(hb)
	if err != nil {
		return nil, malformed("header is not base64url without padding: %v", err)
	}
	var h ucanHeaderWire
	if err := strictObject(header, &h); err != nil {
		return nil, malformed("header: %v", err)
	}
	if err := checkHeaderField("alg", h.Alg, UCANAlgorithm); err != nil {
		return nil, err
	}
	if err := checkHeaderField("typ", h.Typ, UCANType); err != nil {
		return nil, err
	}
	if err := checkHeaderField("ucv", h.Ucv, UCANVersion); err != nil {
		return nil, err
	}

	payload, err := b64.DecodeString(pb)
	if err != nil {
		return nil, malformed("payload is not base64url without padding: %v", err)
	}
	var p ucanPayloadWire
	if err := strictObject(payload, &p); err != nil {
		return nil, malformed("payload: %v", err)
	}
	for _, f := range []struct {
		name    string
		present bool
	}{{"att", p.Att != nil}, {"aud", p.Aud != nil}, {"exp", p.Exp != nil}, {"fct", p.Fct != nil}, {"iss", p.Iss != nil}, {"prf", p.Prf != nil}} {
		if !f.present {
			return nil, malformed("payload has no %q field", f.name)
		}
	}
	if u.Issuer, u.issuerPoint, err = parseDIDKeyPoint(*p.Iss); err != nil {
		return nil, malformed("iss: %v", strings.TrimPrefix(err.Error(), "keycast: "))
	}
	u.IssuerDID, u.pointFor, u.havePoint = *p.Iss, u.Issuer, true
	if u.Audience, err = ParseDIDKey(*p.Aud); err != nil {
		return nil, malformed("aud: %v", strings.TrimPrefix(err.Error(), "keycast: "))
	}
	u.AudienceDID = *p.Aud
	if u.Exp, err = parseUnixSeconds(*p.Exp); err != nil {
		return nil, malformed("exp: %v", err)
	}
	if p.Nbf != nil && string(*p.Nbf) != "null" {
		nbf, err := parseUnixSeconds(*p.Nbf)
		if err != nil {
			return nil, malformed("nbf: %v", err)
		}
		u.Nbf = &nbf
	}
	if p.Nnc != nil {
		u.Nonce = *p.Nnc
	}
	if !isJSONArray(*p.Att) {
		return nil, malformed("att is not an array")
	}
	var prf []string
	if err := json.Unmarshal(*p.Prf, &prf); err != nil || prf == nil {
		return nil, malformed("prf is not an array of strings")
	}
	if u.Facts, err = parseFacts(*p.Fct); err != nil {
		return nil, err
	}

	sig, err := b64.DecodeString(sb)
	if err != nil {
		return nil, malformed("signature is not base64url without padding: %v", err)
	}
	if len(sig) != 64 {
		return nil, malformed("signature is %d bytes; want 64", len(sig))
	}
	copy(u.Signature[:], sig)
	return u, nil
}

func checkHeaderField(name string, got *string, want string) error {
	if got == nil {
		return malformed("header has no %q field", name)
	}
	if *got != want {
		return malformed("header %s is %q; want %q", name, textclip.String(*got, 40), want)
	}
	return nil
}

// strictObject decodes a JSON object into v and rejects trailing data.
func strictObject(b []byte, v any) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return errors.New("not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(v); err != nil {
		return errors.New(jsonErrText(err))
	}
	if dec.More() {
		return errors.New("data after the JSON object")
	}
	return nil
}

func isJSONArray(raw json.RawMessage) bool {
	b := bytes.TrimSpace(raw)
	return len(b) > 0 && b[0] == '['
}

func parseUnixSeconds(raw json.RawMessage) (int64, error) {
	s := string(bytes.TrimSpace(raw))
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s is not an unsigned integer number of seconds", textclip.String(s, 40))
	}
	if v > 1<<62 {
		return 0, fmt.Errorf("%d is out of range", v)
	}
	return int64(v), nil
}

// parseFacts reads the fct array. Keycast writes one object; with several,
// the first occurrence of each key wins. Non-object entries are ignored.
func parseFacts(raw json.RawMessage) (Facts, error) {
	var f Facts
	var entries []json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil || entries == nil {
		return f, malformed("fct is not an array")
	}
	for _, e := range entries {
		var obj map[string]json.RawMessage
		if b := bytes.TrimSpace(e); len(b) == 0 || b[0] != '{' {
			continue
		}
		if err := json.Unmarshal(e, &obj); err != nil {
			return f, malformed("fct entry: %s", jsonErrText(err))
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			v := obj[k]
			if err := f.setFact(k, v); err != nil {
				return f, err
			}
		}
	}
	return f, nil
}

func (f *Facts) setFact(k string, v json.RawMessage) error {
	switch k {
	case FactTenantID:
		if f.TenantID != nil {
			return nil
		}
		if string(v) == "null" {
			return nil
		}
		id, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
		if err != nil {
			return malformed("fact tenant_id %s is not an integer", textclip.String(string(v), 40))
		}
		f.TenantID = &id
	case FactEmail:
		if f.Email != "" {
			return nil
		}
		if err := json.Unmarshal(v, &f.Email); err != nil {
			return malformed("fact email is not a string")
		}
	case FactRedirectOrigin:
		if f.hasRedirectOrigin {
			return nil
		}
		if err := json.Unmarshal(v, &f.RedirectOrigin); err != nil || string(v) == "null" {
			return malformed("fact redirect_origin is not a string")
		}
		f.hasRedirectOrigin = true
	case FactBunkerPubkey:
		if f.BunkerPubkey != "" {
			return nil
		}
		if err := json.Unmarshal(v, &f.BunkerPubkey); err != nil {
			return malformed("fact bunker_pubkey is not a string")
		}
	case FactRelays:
		if f.Relays != nil {
			return nil
		}
		if err := json.Unmarshal(v, &f.Relays); err != nil {
			return malformed("fact relays is not an array of strings")
		}
	default:
		if f.Extra == nil {
			f.Extra = make(map[string]json.RawMessage)
		}
		if _, ok := f.Extra[k]; !ok {
			f.Extra[k] = append(json.RawMessage(nil), v...)
		}
	}
	return nil
}

// Bearer validation errors, in the order ValidateBearer checks them.
var (
	ErrMissingBearer = errors.New("keycast: Authorization header is missing or does not start with \"Bearer \"")
	ErrBadSignature  = errors.New("keycast: UCAN signature does not verify against its issuer")
	// ErrTokenExpired carries Keycast's own message.
	ErrTokenExpired          = errors.New("Token expired")
	ErrTokenNotYetValid      = errors.New("keycast: UCAN is not valid yet (nbf is in the future)")
	ErrMissingRedirectOrigin = errors.New("keycast: UCAN has no redirect_origin fact")
	ErrTenantMismatch        = errors.New("keycast: UCAN tenant_id does not match the request tenant")
	ErrWrongIssuer           = errors.New("keycast: UCAN issuer is neither the user (aud) nor the server")
)

// ErrExpired is an alias of ErrTokenExpired.
var ErrExpired = ErrTokenExpired

// ValidateOptions configures ValidateBearer.
type ValidateOptions struct {
	// Now is the validation time; zero means time.Now().
	Now time.Time
	// ServerPubkey is the key of SERVER_NSEC; tokens it issued are accepted
	// besides self-issued ones. Zero means only self-issued tokens pass.
	ServerPubkey PublicKey
	// ExpectedTenant is the request tenant; 0 disables the tenant check (the
	// Dec-2025 RPC path passes 0).
	ExpectedTenant int64
}

// BearerToken returns the token of an "Authorization: Bearer <token>" header
// value, or ErrMissingBearer.
func BearerToken(authHeader string) (string, error) {
	tok, ok := strings.CutPrefix(authHeader, "Bearer ")
	if !ok || tok == "" {
		return "", ErrMissingBearer
	}
	return tok, nil
}

// ValidateBearer validates an Authorization header value in Keycast's order:
// the "Bearer " prefix (ErrMissingBearer), parsing (ErrMalformedToken), the
// signature (ErrBadSignature), exp < now (ErrTokenExpired), nbf > now when set
// (ErrTokenNotYetValid; Keycast never sets nbf), the redirect_origin fact
// (ErrMissingRedirectOrigin), the tenant when both opt.ExpectedTenant and the
// tenant_id fact are set (ErrTenantMismatch), and finally that the issuer is
// the audience or opt.ServerPubkey (ErrWrongIssuer). Every error matches its
// sentinel with errors.Is.
func ValidateBearer(authHeader string, opt ValidateOptions) (*UCAN, error) {
	tok, err := BearerToken(authHeader)
	if err != nil {
		return nil, err
	}
	u, err := ParseUCAN(tok)
	if err != nil {
		return nil, err
	}
	if err := u.Verify(); err != nil {
		return nil, err
	}
	now := opt.Now
	if now.IsZero() {
		now = time.Now()
	}
	if u.Exp < now.Unix() {
		return nil, ErrTokenExpired
	}
	if u.Nbf != nil && *u.Nbf > now.Unix() {
		return nil, ErrTokenNotYetValid
	}
	if !u.Facts.HasRedirectOrigin() {
		return nil, ErrMissingRedirectOrigin
	}
	if opt.ExpectedTenant != 0 && u.Facts.TenantID != nil && *u.Facts.TenantID != opt.ExpectedTenant {
		return nil, fmt.Errorf("%w: token tenant %d, request tenant %d", ErrTenantMismatch, *u.Facts.TenantID, opt.ExpectedTenant)
	}
	if u.Issuer != u.Audience && (opt.ServerPubkey.IsZero() || u.Issuer != opt.ServerPubkey) {
		return nil, ErrWrongIssuer
	}
	return u, nil
}
