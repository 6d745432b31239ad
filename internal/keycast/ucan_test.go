package keycast

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

var (
	testServerSK = "0000000000000000000000000000000000000000000000000000000000000003"
	testNow      = time.Unix(1765000000, 0)
)

func testKeys(t testing.TB) (server, user *Signer) {
	server = NewSigner(SecretKey(hex32(t, testServerSK)))
	user = NewSigner(SecretKey(hex32(t, nip19SecHex)))
	return server, user
}

func accessFacts() Facts {
	return Facts{
		TenantID:       Int64(1),
		Email:          "lt1765000000-0@test.local",
		RedirectOrigin: "http://localhost:3000",
		BunkerPubkey:   "f9308a019258c31049344f85f89d5229b531c845836f99b08601f113bce036f9",
	}
}

func TestDIDKey(t *testing.T) {
	// Expected values computed with an independent big-integer base58.
	tests := map[string]string{
		"7e7e9c42a91bfef19fa929e5fda1b72e0ebc1a4c1141673e2794234d86addf4e": "did:key:z6DtWJY7BVPDKUFjWWJgLxmNzPF5NSEtE4TVvB4pCE2kb4RK",
		"f9308a019258c31049344f85f89d5229b531c845836f99b08601f113bce036f9": "did:key:z6DteZVCzSzhHviA4AatPhpL3EaRyBc4XMhThsBakPjrGmU4",
	}
	for h, want := range tests {
		pk := PublicKey(hex32(t, h))
		if got := DIDKey(pk); got != want {
			t.Errorf("DIDKey(%s) = %s, want %s", h, got, want)
		}
		back, err := ParseDIDKey(want)
		if err != nil || back != pk {
			t.Errorf("ParseDIDKey(%s) = %x, %v", want, back, err)
		}
	}
	for i := range 20 {
		pk := MustGenerateSecretKey().Public()
		back, err := ParseDIDKey(DIDKey(pk))
		if err != nil || back != pk {
			t.Fatalf("round trip %d: %v", i, err)
		}
	}
	bad := []string{
		"",
		"did:key:",
		"did:key:z",
		"did:web:example.com",
		"did:key:z0OIl", // not base58
		"did:key:zQ3shokFTS3brHcDQrn82RUDfCZESWL1ZdCEJwekUDPQiYBme", // standard 33-byte secp256k1 did:key
		"did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK",  // ed25519
		"did:key:z" + strings.Repeat("1", 70),
	}
	for _, s := range bad {
		if _, err := ParseDIDKey(s); err == nil {
			t.Errorf("ParseDIDKey(%q) accepted", s)
		}
	}
}

func TestUCANGolden(t *testing.T) {
	server, user := testKeys(t)
	tok, err := MintUCAN(server, user.Public(), accessFacts(), DefaultTokenLifetime, testNow)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("token has %d parts", len(parts))
	}
	header, _ := base64.RawURLEncoding.DecodeString(parts[0])
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	if string(header) != UCANHeaderJSON {
		t.Fatalf("header %s", header)
	}
	var out strings.Builder
	fmt.Fprintf(&out, "header: %s\npayload: %s\ntoken: %s\n", header, payload, tok)

	session, err := MintUCAN(user, user.Public(), Facts{TenantID: Int64(1), Email: "a@b.c", RedirectOrigin: "http://localhost:3000", Relays: []string{"wss://relay.damus.io"}}, DefaultTokenLifetime, testNow)
	if err != nil {
		t.Fatal(err)
	}
	sp, _ := base64.RawURLEncoding.DecodeString(strings.Split(session, ".")[1])
	fmt.Fprintf(&out, "session payload: %s\n", sp)
	golden(t, "ucan.golden", []byte(out.String()))

	// Deterministic signing: minting twice gives the same token.
	again, _ := MintUCAN(server, user.Public(), accessFacts(), DefaultTokenLifetime, testNow)
	if again != tok {
		t.Fatal("minting is not deterministic")
	}
}

func TestUCANRoundTrip(t *testing.T) {
	server, user := testKeys(t)
	facts := accessFacts()
	facts.Extra = map[string]json.RawMessage{"first_party": json.RawMessage(`true`), "cnf": json.RawMessage(`{ "jkt" : "abc", "a": [1, 2] }`)}
	tok, err := MintUCAN(server, user.Public(), facts, time.Hour, testNow)
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[1])
	if !strings.Contains(string(payload), `"fct":[{"bunker_pubkey":"f930`) || !strings.Contains(string(payload), `"cnf":{"a":[1,2],"jkt":"abc"},"email"`) {
		t.Fatalf("facts not canonical: %s", payload)
	}
	u, err := ParseUCAN(tok)
	if err != nil {
		t.Fatal(err)
	}
	if err := u.Verify(); err != nil {
		t.Fatal(err)
	}
	if u.Issuer != server.Public() || u.Audience != user.Public() || u.UserPubkey() != user.Public() {
		t.Fatal("issuer or audience wrong")
	}
	if u.Exp != testNow.Add(time.Hour).Unix() || u.Nbf != nil {
		t.Fatalf("exp %d nbf %v", u.Exp, u.Nbf)
	}
	f := u.Facts
	if f.TenantID == nil || *f.TenantID != 1 || f.Email != facts.Email || f.RedirectOrigin != facts.RedirectOrigin || f.BunkerPubkey != facts.BunkerPubkey || !f.HasRedirectOrigin() {
		t.Fatalf("facts %+v", f)
	}
	if string(f.Extra["first_party"]) != "true" || string(f.Extra["cnf"]) != `{"a":[1,2],"jkt":"abc"}` {
		t.Fatalf("extra facts %v", f.Extra)
	}
	if u.SelfIssued() {
		t.Fatal("server token reported as self-issued")
	}
	if _, err := MintUCAN(server, user.Public(), Facts{Extra: map[string]json.RawMessage{"email": json.RawMessage(`"x"`)}}, time.Hour, testNow); err == nil {
		t.Fatal("Extra overriding a known fact was accepted")
	}
}

func TestValidateBearer(t *testing.T) {
	server, user := testKeys(t)
	stranger := NewSigner(MustGenerateSecretKey())
	access, _ := MintUCAN(server, user.Public(), accessFacts(), DefaultTokenLifetime, testNow)
	session, _ := MintUCAN(user, user.Public(), Facts{TenantID: Int64(7), Email: "a@b.c", RedirectOrigin: "http://localhost:3000"}, DefaultTokenLifetime, testNow)
	foreign, _ := MintUCAN(stranger, user.Public(), accessFacts(), DefaultTokenLifetime, testNow)
	noTenant := accessFacts()
	noTenant.TenantID = nil
	noTenantTok, _ := MintUCAN(server, user.Public(), noTenant, DefaultTokenLifetime, testNow)

	// A token without redirect_origin cannot be minted by MintUCAN (it always
	// writes the fact), so build one by hand.
	noOrigin := handMint(t, server, user.Public(), `[{"email":"a@b.c","tenant_id":1}]`, testNow.Unix()+60)
	nbfFuture := handMintPayload(t, server, fmt.Sprintf(`{"att":[],"aud":%q,"exp":%d,"fct":[{"redirect_origin":"x"}],"iss":%q,"nbf":%d,"prf":[]}`, DIDKey(user.Public()), testNow.Unix()+60, DIDKey(server.Public()), testNow.Unix()+30))

	sig := strings.Split(access, ".")
	tampered := sig[0] + "." + sig[1] + "." + flipB64(sig[2])
	otherPayload := strings.Split(session, ".")[1]
	spliced := sig[0] + "." + otherPayload + "." + sig[2]

	opt := ValidateOptions{Now: testNow, ServerPubkey: server.Public(), ExpectedTenant: 1}
	tests := []struct {
		name   string
		header string
		opt    ValidateOptions
		want   error
	}{
		{"access token", "Bearer " + access, opt, nil},
		{"session token, tenant check off", "Bearer " + session, ValidateOptions{Now: testNow}, nil},
		{"missing header", "", opt, ErrMissingBearer},
		{"lower-case bearer", "bearer " + access, opt, ErrMissingBearer},
		{"empty token", "Bearer ", opt, ErrMissingBearer},
		{"garbage", "Bearer abc", opt, ErrMalformedToken},
		{"tampered signature", "Bearer " + tampered, opt, ErrBadSignature},
		{"spliced payload", "Bearer " + spliced, opt, ErrBadSignature},
		{"expired", "Bearer " + access, ValidateOptions{Now: testNow.Add(DefaultTokenLifetime + time.Second), ServerPubkey: server.Public()}, ErrTokenExpired},
		{"exactly at exp", "Bearer " + access, ValidateOptions{Now: testNow.Add(DefaultTokenLifetime), ServerPubkey: server.Public()}, nil},
		{"nbf in the future", "Bearer " + nbfFuture, opt, ErrTokenNotYetValid},
		{"no redirect_origin", "Bearer " + noOrigin, opt, ErrMissingRedirectOrigin},
		{"tenant mismatch", "Bearer " + session, ValidateOptions{Now: testNow, ExpectedTenant: 1}, ErrTenantMismatch},
		{"missing tenant fact allowed", "Bearer " + noTenantTok, opt, nil},
		{"wrong issuer", "Bearer " + foreign, opt, ErrWrongIssuer},
		{"server key unset", "Bearer " + access, ValidateOptions{Now: testNow}, ErrWrongIssuer},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, err := ValidateBearer(tc.header, tc.opt)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if u.Audience != user.Public() {
					t.Fatal("wrong audience")
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	if ErrTokenExpired.Error() != "Token expired" {
		t.Fatalf("ErrTokenExpired text %q", ErrTokenExpired)
	}
}

func flipB64(s string) string {
	b, _ := base64.RawURLEncoding.DecodeString(s)
	b[10] ^= 0x40
	return base64.RawURLEncoding.EncodeToString(b)
}

func handMint(t *testing.T, s *Signer, aud PublicKey, fct string, exp int64) string {
	t.Helper()
	return handMintPayload(t, s, fmt.Sprintf(`{"att":[],"aud":%q,"exp":%d,"fct":%s,"iss":%q,"prf":[]}`, DIDKey(aud), exp, fct, DIDKey(s.Public())))
}

// handMintPayload signs an arbitrary payload with the standard header.
func handMintPayload(t testing.TB, s *Signer, payload string) string {
	t.Helper()
	return handMintRaw(t, s, UCANHeaderJSON, payload)
}

func handMintRaw(t testing.TB, s *Signer, header, payload string) string {
	t.Helper()
	signed := base64.RawURLEncoding.EncodeToString([]byte(header)) + "." + base64.RawURLEncoding.EncodeToString([]byte(payload))
	sig, err := s.Sign(sha256Sum([]byte(signed)))
	if err != nil {
		t.Fatal(err)
	}
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig[:])
}

func TestParseUCANErrors(t *testing.T) {
	server, user := testKeys(t)
	iss, aud := DIDKey(server.Public()), DIDKey(user.Public())
	good := func(extra string) string {
		return fmt.Sprintf(`{"att":[],"aud":%q,"exp":100,"fct":[{"redirect_origin":"o"}],"iss":%q,"prf":[]%s}`, aud, iss, extra)
	}
	b64 := base64.RawURLEncoding.EncodeToString
	valid := handMintPayload(t, server, good(""))
	parts := strings.Split(valid, ".")
	tests := []struct {
		name, token, want string
	}{
		{"one part", "abc", "1 part"},
		{"two parts", "a.b", "2 parts"},
		{"four parts", valid + ".x", "more than 3 parts"},
		{"padded header", parts[0] + "=." + parts[1] + "." + parts[2], "header is not base64url"},
		{"std alphabet", strings.ReplaceAll(strings.ReplaceAll(valid, "-", "+"), "_", "/") + "+", "base64url"},
		{"header not json", b64([]byte("nope")) + "." + parts[1] + "." + parts[2], "header: not a JSON object"},
		{"header wrong alg", handMintRaw(t, server, `{"alg":"EdDSA","typ":"JWT","ucv":"0.9.0-canary"}`, good("")), `header alg is "EdDSA"`},
		{"header no ucv", handMintRaw(t, server, `{"alg":"SchnorrSecp256k1","typ":"JWT"}`, good("")), `header has no "ucv"`},
		{"header wrong ucv", handMintRaw(t, server, `{"alg":"SchnorrSecp256k1","typ":"JWT","ucv":"0.10.0"}`, good("")), `header ucv`},
		{"payload not object", handMintPayload(t, server, `[]`), "payload: not a JSON object"},
		{"payload trailing", handMintPayload(t, server, good("")+"{}"), "data after"},
		{"no att", handMintPayload(t, server, fmt.Sprintf(`{"aud":%q,"exp":1,"fct":[],"iss":%q,"prf":[]}`, aud, iss)), `no "att"`},
		{"no prf", handMintPayload(t, server, fmt.Sprintf(`{"att":[],"aud":%q,"exp":1,"fct":[],"iss":%q}`, aud, iss)), `no "prf"`},
		{"no exp", handMintPayload(t, server, fmt.Sprintf(`{"att":[],"aud":%q,"fct":[],"iss":%q,"prf":[]}`, aud, iss)), `no "exp"`},
		{"negative exp", handMintPayload(t, server, fmt.Sprintf(`{"att":[],"aud":%q,"exp":-1,"fct":[],"iss":%q,"prf":[]}`, aud, iss)), "exp: -1 is not an unsigned integer"},
		{"float exp", handMintPayload(t, server, fmt.Sprintf(`{"att":[],"aud":%q,"exp":1.5,"fct":[],"iss":%q,"prf":[]}`, aud, iss)), "exp: 1.5"},
		{"att not array", handMintPayload(t, server, fmt.Sprintf(`{"att":{},"aud":%q,"exp":1,"fct":[],"iss":%q,"prf":[]}`, aud, iss)), "att is not an array"},
		{"fct not array", handMintPayload(t, server, fmt.Sprintf(`{"att":[],"aud":%q,"exp":1,"fct":{},"iss":%q,"prf":[]}`, aud, iss)), "fct is not an array"},
		{"bad tenant", handMintPayload(t, server, fmt.Sprintf(`{"att":[],"aud":%q,"exp":1,"fct":[{"tenant_id":"1"}],"iss":%q,"prf":[]}`, aud, iss)), "tenant_id"},
		{"bad iss", handMintPayload(t, server, fmt.Sprintf(`{"att":[],"aud":%q,"exp":1,"fct":[],"iss":"did:web:x","prf":[]}`, aud)), "iss:"},
		{"short signature", parts[0] + "." + parts[1] + "." + b64([]byte("short")), "signature is 5 bytes"},
		{"too big", strings.Repeat("a", MaxUCANSize+1), "limit"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseUCAN(tc.token)
			if !errors.Is(err, ErrMalformedToken) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrMalformedToken containing %q", err, tc.want)
			}
		})
	}
	if _, err := ParseUCAN(valid); err != nil {
		t.Fatalf("valid token refused: %v", err)
	}
}

func TestUCANVerifyAfterIssuerChange(t *testing.T) {
	server, user := testKeys(t)
	tok, _ := MintUCAN(server, user.Public(), accessFacts(), time.Hour, testNow)
	u, err := ParseUCAN(tok)
	if err != nil {
		t.Fatal(err)
	}
	u.Issuer = user.Public()
	if err := u.Verify(); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("verify with a replaced issuer: %v", err)
	}
	u.Issuer = server.Public()
	if err := u.Verify(); err != nil {
		t.Fatal(err)
	}
	hand := &UCAN{Issuer: u.Issuer, SignedData: u.SignedData, Signature: u.Signature}
	if err := hand.Verify(); err != nil {
		t.Fatalf("hand-built UCAN: %v", err)
	}
}
