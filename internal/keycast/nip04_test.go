package keycast

import (
	"errors"
	"strings"
	"testing"
)

// The go-nostr / nostr-tools NIP-04 interoperability vector.
const (
	nip04Sk1        = "91ba716fa9e7ea2fcbad360cf4f8e0d312f73984da63d90f524ad61a6a1e7dbe"
	nip04Sk2        = "96f6fa197aa07477ab88f6981118466ae3a982faab8ad5db9d5426870c73d220"
	nip04Ciphertext = "zJxfaJ32rN5Dg1ODjOlEew==?iv=EV5bUjcc4OX2Km/zPp4ndQ=="
)

func TestNIP04KnownVector(t *testing.T) {
	sk1, sk2 := SecretKey(hex32(t, nip04Sk1)), SecretKey(hex32(t, nip04Sk2))
	for _, c := range []struct {
		sk SecretKey
		pk PublicKey
	}{{sk2, sk1.Public()}, {sk1, sk2.Public()}} {
		got, err := NIP04Decrypt(c.sk, c.pk, nip04Ciphertext)
		if err != nil || got != "nanana" {
			t.Fatalf("decrypt = %q, %v; want nanana", got, err)
		}
	}
}

func TestNIP04RoundTrip(t *testing.T) {
	a, b := MustGenerateSecretKey(), MustGenerateSecretKey()
	for _, msg := range []string{"", "x", strings.Repeat("16 bytes exactly", 1), strings.Repeat("é", 1000)} {
		ct, err := NIP04Encrypt(a, b.Public(), msg)
		if err != nil {
			t.Fatal(err)
		}
		got, err := NIP04Decrypt(b, a.Public(), ct)
		if err != nil || got != msg {
			t.Fatalf("round trip of %d bytes: %q, %v", len(msg), got, err)
		}
	}
}

func TestNIP04Invalid(t *testing.T) {
	sk1, sk2 := SecretKey(hex32(t, nip04Sk1)), SecretKey(hex32(t, nip04Sk2))
	for _, p := range []string{
		"",
		"zJxfaJ32rN5Dg1ODjOlEew==",
		"zJxfaJ32rN5Dg1ODjOlEew==?iv=!!!",
		"zJxfaJ32rN5Dg1ODjOlEew==?iv=AAAA",
		"zJxfaJ32rN5D?iv=EV5bUjcc4OX2Km/zPp4ndQ==",
		"?iv=EV5bUjcc4OX2Km/zPp4ndQ==",
	} {
		if _, err := NIP04Decrypt(sk2, sk1.Public(), p); !errors.Is(err, ErrNIP04Invalid) {
			t.Errorf("%q: err = %v, want ErrNIP04Invalid", p, err)
		}
	}
	// Wrong key: padding check catches it (or, rarely, garbage plaintext).
	other := MustGenerateSecretKey()
	if got, err := NIP04Decrypt(other, sk1.Public(), nip04Ciphertext); err == nil && got == "nanana" {
		t.Fatal("decrypted with the wrong key")
	}
}
