package keycast

import (
	"errors"
	"strings"
	"testing"
)

func TestPKCE(t *testing.T) {
	// RFC 7636 appendix B.
	const verifier, challenge = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk", "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
	if got := PKCEChallengeS256(verifier); got != challenge {
		t.Fatalf("PKCEChallengeS256 = %s, want %s", got, challenge)
	}
	tests := []struct {
		name, method, challenge, verifier string
		want                              error
	}{
		{"S256 ok", PKCES256, challenge, verifier, nil},
		{"S256 mismatch", PKCES256, challenge, verifier + "x", ErrPKCEMismatch},
		{"S256 challenge given as plain", PKCES256, verifier, verifier, ErrPKCEMismatch},
		{"plain ok", PKCEPlain, "abc", "abc", nil},
		{"default is plain", "", "abc", "abc", nil},
		{"default is not S256", "", challenge, verifier, ErrPKCEMismatch},
		{"plain mismatch", PKCEPlain, "abc", "abd", ErrPKCEMismatch},
		{"missing verifier", PKCES256, challenge, "", ErrPKCEVerifierRequired},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := VerifyPKCE(tc.method, tc.challenge, tc.verifier); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	if err := VerifyPKCE("S512", "a", "a"); err == nil || !strings.Contains(err.Error(), "S512") {
		t.Fatalf("unknown method: err = %v", err)
	}
	if ErrPKCEMismatch.Error() != "Invalid code_verifier: PKCE validation failed" || ErrPKCEVerifierRequired.Error() != "code_verifier required for PKCE flow" {
		t.Fatal("PKCE wire messages changed")
	}
	v1, v2 := NewPKCEVerifier(), NewPKCEVerifier()
	if len(v1) != 43 || v1 == v2 || strings.ContainsAny(v1, "+/=") {
		t.Fatalf("verifiers %q %q", v1, v2)
	}
	if err := VerifyPKCE(PKCES256, PKCEChallengeS256(v1), v1); err != nil {
		t.Fatal(err)
	}
}

func TestDeriveBunkerKey(t *testing.T) {
	sk := SecretKey(hex32(t, nip19SecHex))
	const secret = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUV"
	got, err := DeriveBunkerKey(sk, secret)
	if err != nil {
		t.Fatal(err)
	}
	// HKDF-SHA256(salt none, ikm sk, info prefix+secret), computed with an
	// independent HMAC implementation.
	if got.Hex() != "0b4c2fe69e091055d4e022920187f630feeca9954f5ccb74e09cc7a598ac6fb6" {
		t.Fatalf("bunker key %s", got.Hex())
	}
	again, _ := DeriveBunkerKey(sk, secret)
	if again != got {
		t.Fatal("derivation is not deterministic")
	}
	other, _ := DeriveBunkerKey(sk, secret+"x")
	if other == got || got == sk || got.Public() == sk.Public() {
		t.Fatal("derived keys are not distinct")
	}
	if _, err := DeriveBunkerKey(SecretKey{}, secret); err == nil {
		t.Fatal("zero user key accepted")
	}
}

func TestOriginOf(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"http://localhost:3000/callback", "http://localhost:3000", true},
		{"http://127.0.0.1:8080/cb?x=1#f", "http://127.0.0.1:8080", true},
		{"http://[::1]:3000/callback", "http://[::1]:3000", true},
		{"http://[::1]/callback", "http://[::1]", true},
		{"https://Example.COM/callback", "https://example.com", true},
		{"https://example.com:443/x", "https://example.com", true},
		{"https://example.com:8443/x", "https://example.com:8443", true},
		{"http://localhost:80/x", "http://localhost", true},
		{"HTTP://LOCALHOST:3000/x", "http://localhost:3000", true},
		{"http://example.com/callback", "", false},
		{"http://10.0.0.1:3000/callback", "", false},
		{"divine://callback", "", false},
		{"/callback", "", false},
		{"https://", "", false},
		{"https://example.com:99999/", "", false},
		{"::not a url", "", false},
	}
	for _, tc := range tests {
		got, err := OriginOf(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("OriginOf(%q) = %q, %v; want %q ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}
