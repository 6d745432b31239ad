package keycast

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// NIP-19 examples (github.com/nostr-protocol/nips/blob/master/19.md).
const (
	nip19Npub   = "npub10elfcs4fr0l0r8af98jlmgdh9c8tcxjvz9qkw038js35mp4dma8qzvjptg"
	nip19PubHex = "7e7e9c42a91bfef19fa929e5fda1b72e0ebc1a4c1141673e2794234d86addf4e"
	nip19Nsec   = "nsec1vl029mgpspedva04g90vltkh6fvh240zqtv9k0t9af8935ke9laqsnlfe5"
	nip19SecHex = "67dea2ed018072d675f5415ecfaed7d2597555e202d85b3d65ea4e58d2d92ffa"
)

func TestBech32NIP19(t *testing.T) {
	sk, err := ParseSecretKey(nip19Nsec)
	if err != nil {
		t.Fatal(err)
	}
	if sk.Hex() != nip19SecHex {
		t.Fatalf("nsec decodes to %s, want %s", sk.Hex(), nip19SecHex)
	}
	if got := EncodeNsec(sk); got != nip19Nsec {
		t.Fatalf("EncodeNsec = %s, want %s", got, nip19Nsec)
	}
	pk, err := ParseNpub(nip19Npub)
	if err != nil {
		t.Fatal(err)
	}
	if pk.Hex() != nip19PubHex {
		t.Fatalf("npub decodes to %s, want %s", pk.Hex(), nip19PubHex)
	}
	if got := EncodeNpub(pk); got != nip19Npub {
		t.Fatalf("EncodeNpub = %s, want %s", got, nip19Npub)
	}
	upper, err := ParseSecretKey(strings.ToUpper(nip19Nsec))
	if err != nil || upper != sk {
		t.Fatalf("upper-case nsec: %v", err)
	}
}

func TestParseSecretKey(t *testing.T) {
	corrupt := []byte(nip19Nsec)
	corrupt[10] = 'q'
	if corrupt[10] == nip19Nsec[10] {
		corrupt[10] = 'p'
	}
	tests := []struct {
		name, in, wantHex, wantErr string
	}{
		{"hex", nip19SecHex, nip19SecHex, ""},
		{"hex upper with spaces", "  " + strings.ToUpper(nip19SecHex) + "\n", nip19SecHex, ""},
		{"nsec", nip19Nsec, nip19SecHex, ""},
		{"zero", strings.Repeat("0", 64), "", "zero or not below"},
		{"order n", "fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141", "", "zero or not below"},
		{"n-1 is valid", "fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364140", "fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364140", ""},
		{"short", "abcd", "", "want 64 hex characters or nsec1"},
		{"not hex", strings.Repeat("g", 64), "", "not valid hex"},
		{"bad checksum", string(corrupt), "", "checksum"},
		{"npub given", nip19Npub, "", "no nsec1 prefix"},
		{"mixed case", "nsec1" + strings.ToUpper(nip19Nsec[5:10]) + nip19Nsec[10:], "", "mixes upper and lower"},
		{"empty", "", "", "want 64 hex"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sk, err := ParseSecretKey(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if sk.Hex() != tc.wantHex {
				t.Fatalf("got %s, want %s", sk.Hex(), tc.wantHex)
			}
		})
	}
}

func TestParsePublicKey(t *testing.T) {
	tests := []struct {
		name, in string
		ok       bool
	}{
		{"nip19", nip19PubHex, true},
		{"upper", strings.ToUpper(nip19PubHex), true},
		{"not on curve", "eefdea4cdb677750a420fee807eacf21eb9898ae79b9768766e4faa04a2d4a34", false},
		{"x >= p", "fffffffffffffffffffffffffffffffffffffffffffffffffffffffefffffc30", false},
		{"short", nip19PubHex[:62], false},
		{"not hex", "zz" + nip19PubHex[2:], false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pk, err := ParsePublicKey(tc.in)
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok=%v", err, tc.ok)
			}
			if tc.ok && pk.Hex() != strings.ToLower(tc.in) {
				t.Fatalf("round trip %s", pk.Hex())
			}
		})
	}
}

func TestGenerateSecretKey(t *testing.T) {
	a, err := GenerateSecretKey()
	if err != nil {
		t.Fatal(err)
	}
	b := MustGenerateSecretKey()
	if a == b {
		t.Fatal("two generated keys are equal")
	}
	if !a.Valid() {
		t.Fatal("generated key is not valid")
	}
	back, err := ParseSecretKey(EncodeNsec(a))
	if err != nil || back != a {
		t.Fatalf("nsec round trip: %v", err)
	}
	if _, err := ParsePublicKey(a.Public().Hex()); err != nil {
		t.Fatalf("public key of a generated key does not parse: %v", err)
	}
}

func TestSecretKeyIsRedacted(t *testing.T) {
	sk := SecretKey(hex32(t, nip19SecHex))
	for _, s := range []string{fmt.Sprint(sk), fmt.Sprintf("%v %+v %#v %s", sk, sk, sk, sk)} {
		if strings.Contains(s, nip19SecHex[:16]) {
			t.Fatalf("secret leaked in %q", s)
		}
	}
	if !errors.Is(ErrInvalidSecretKey, ErrInvalidSecretKey) {
		t.Fatal("sentinel")
	}
}

func TestPublicKeyText(t *testing.T) {
	var pk PublicKey
	if err := pk.UnmarshalText([]byte(nip19PubHex)); err != nil {
		t.Fatal(err)
	}
	b, _ := pk.MarshalText()
	if string(b) != nip19PubHex {
		t.Fatalf("MarshalText = %s", b)
	}
	if err := pk.UnmarshalText([]byte("00")); err == nil {
		t.Fatal("want an error for a short key")
	}
}
