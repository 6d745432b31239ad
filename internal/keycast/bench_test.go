package keycast

import (
	"crypto/sha256"
	"encoding/json"
	"testing"
	"time"
)

func BenchmarkSignerSign(b *testing.B) {
	s := NewSigner(SecretKey(hex32(b, nip19SecHex)))
	msg := sha256.Sum256([]byte("bench"))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Sign(msg); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSignerSignRandom(b *testing.B) {
	s := NewSigner(SecretKey(hex32(b, nip19SecHex)))
	msg := sha256.Sum256([]byte("bench"))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.SignRandom(msg); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSignSchnorrNoSigner(b *testing.B) {
	sk := SecretKey(hex32(b, nip19SecHex))
	msg := sha256.Sum256([]byte("bench"))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := SignSchnorr(sk, msg, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerify(b *testing.B) {
	s := NewSigner(SecretKey(hex32(b, nip19SecHex)))
	msg := sha256.Sum256([]byte("bench"))
	sig, _ := s.Sign(msg)
	pk := s.Public()
	b.ReportAllocs()
	for b.Loop() {
		if !VerifySchnorr(pk, msg, sig) {
			b.Fatal("verify failed")
		}
	}
}

func BenchmarkEventID(b *testing.B) {
	var ev Event
	json.Unmarshal([]byte(knownEvents[1]), &ev)
	b.ReportAllocs()
	b.SetBytes(int64(len(ev.Content)))
	for b.Loop() {
		_ = EventID(ev.PubKey, ev.CreatedAt, ev.Kind, ev.Tags, ev.Content)
	}
}

func BenchmarkSignEvent(b *testing.B) {
	s := NewSigner(SecretKey(hex32(b, nip19SecHex)))
	raw, _ := AppendRPCBody(nil, MethodSignEvent, s.Public().Hex(), 1765000000, "")
	var req RPCRequest
	json.Unmarshal(raw, &req)
	b.ReportAllocs()
	for b.Loop() {
		ev, err := ParseUnsignedEvent(req.Params[0])
		if err != nil {
			b.Fatal(err)
		}
		signed, err := SignEvent(s, ev)
		if err != nil {
			b.Fatal(err)
		}
		_ = signed.AppendJSON(nil)
	}
}

func BenchmarkParseUnsignedEvent(b *testing.B) {
	raw, _ := AppendRPCBody(nil, MethodSignEvent, nip19PubHex, 1765000000, "")
	var req RPCRequest
	json.Unmarshal(raw, &req)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseUnsignedEvent(req.Params[0]); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNIP44ConversationKey(b *testing.B) {
	sk := SecretKey(hex32(b, nip19SecHex))
	pk := MustGenerateSecretKey().Public()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NIP44ConversationKey(sk, pk); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNIP44Encrypt(b *testing.B) {
	ck, _ := NIP44ConversationKey(SecretKey(hex32(b, nip19SecHex)), MustGenerateSecretKey().Public())
	b.ReportAllocs()
	b.SetBytes(int64(len(NIP44TestPlaintext)))
	for b.Loop() {
		if _, err := NIP44Encrypt(NIP44TestPlaintext, ck, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidateBearer(b *testing.B) {
	server, user := testKeys(b)
	tok, _ := MintUCAN(server, user.Public(), accessFacts(), DefaultTokenLifetime, testNow)
	header := "Bearer " + tok
	opt := ValidateOptions{Now: testNow, ServerPubkey: server.Public(), ExpectedTenant: 1}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ValidateBearer(header, opt); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseUCAN(b *testing.B) {
	server, user := testKeys(b)
	tok, _ := MintUCAN(server, user.Public(), accessFacts(), DefaultTokenLifetime, testNow)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseUCAN(tok); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMintUCAN(b *testing.B) {
	server, user := testKeys(b)
	facts := accessFacts()
	now := time.Unix(1765000000, 0)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := MintUCAN(server, user.Public(), facts, DefaultTokenLifetime, now); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMasterKeyOpen(b *testing.B) {
	k, _ := GenerateMasterKey()
	sealed, _ := k.Seal(make([]byte, 32))
	g := k.AEAD()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := OpenWith(g, sealed); err != nil {
			b.Fatal(err)
		}
	}
}
