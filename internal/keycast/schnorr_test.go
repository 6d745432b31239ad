package keycast

import (
	"crypto/sha256"
	"testing"
)

func TestSignerModes(t *testing.T) {
	sk := SecretKey(hex32(t, nip19SecHex))
	s := NewSigner(sk)
	if s == nil {
		t.Fatal("NewSigner returned nil for a valid key")
	}
	if s.Public() != sk.Public() {
		t.Fatal("Signer.Public differs from SecretKey.Public")
	}
	msg := sha256.Sum256([]byte("keycast"))
	var zero [32]byte

	det1, err := s.Sign(msg)
	if err != nil {
		t.Fatal(err)
	}
	det2, _ := s.SignAux(msg, nil)
	det3, _ := s.SignAux(msg, &zero)
	det4, _ := SignSchnorr(sk, msg, nil)
	if det1 != det2 || det1 != det3 || det1 != det4 {
		t.Fatal("no-aux signatures differ between Sign, SignAux(nil), SignAux(zero) and SignSchnorr(nil)")
	}
	r1, err := s.SignRandom(msg)
	if err != nil {
		t.Fatal(err)
	}
	r2, _ := s.SignRandom(msg)
	if r1 == r2 {
		t.Fatal("two SignRandom signatures are equal")
	}
	for name, sig := range map[string][64]byte{"det": det1, "rand1": r1, "rand2": r2} {
		if !VerifySchnorr(s.Public(), msg, sig) {
			t.Fatalf("%s signature does not verify", name)
		}
	}
}

func TestVerifyRejectsTampering(t *testing.T) {
	s := NewSigner(SecretKey(hex32(t, nip19SecHex)))
	msg := sha256.Sum256([]byte("tamper"))
	sig, _ := s.Sign(msg)
	other := NewSigner(SecretKey(hex32(t, "0000000000000000000000000000000000000000000000000000000000000003")))
	for i := range 64 {
		bad := sig
		bad[i] ^= 0x01
		if VerifySchnorr(s.Public(), msg, bad) {
			t.Fatalf("signature with byte %d flipped verifies", i)
		}
	}
	badMsg := msg
	badMsg[31] ^= 1
	if VerifySchnorr(s.Public(), badMsg, sig) {
		t.Fatal("signature verifies for another message")
	}
	if VerifySchnorr(other.Public(), msg, sig) {
		t.Fatal("signature verifies for another key")
	}
	if VerifySchnorr(PublicKey{}, msg, sig) {
		t.Fatal("signature verifies for the zero key")
	}
}

func TestInvalidSigner(t *testing.T) {
	if NewSigner(SecretKey{}) != nil {
		t.Fatal("NewSigner accepted the zero key")
	}
	if _, err := NewSignerChecked(SecretKey{}); err == nil {
		t.Fatal("NewSignerChecked accepted the zero key")
	}
	if _, err := SignSchnorr(SecretKey{}, [32]byte{}, nil); err == nil {
		t.Fatal("SignSchnorr accepted the zero key")
	}
	if !(SecretKey{}).Public().IsZero() {
		t.Fatal("Public of the zero key is not zero")
	}
}

// TestSignerOddY covers a key whose public point has odd y, where the
// secret must be negated (vector 0's key 3 has even y).
func TestSignerOddY(t *testing.T) {
	found := false
	for i := byte(1); i < 40 && !found; i++ {
		var sk SecretKey
		sk[31] = i
		s := NewSigner(sk)
		var d [32]byte
		s.d.PutBytes(&d)
		if d != [32]byte(sk) {
			found = true
			msg := sha256.Sum256([]byte{i})
			sig, err := s.Sign(msg)
			if err != nil || !VerifySchnorr(s.Public(), msg, sig) {
				t.Fatalf("key %d: signature does not verify (%v)", i, err)
			}
		}
	}
	if !found {
		t.Fatal("no odd-y key among 1..39")
	}
}
