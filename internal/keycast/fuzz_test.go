package keycast

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func FuzzParseUCAN(f *testing.F) {
	server, user := testKeys(f)
	tok, _ := MintUCAN(server, user.Public(), accessFacts(), DefaultTokenLifetime, testNow)
	f.Add(tok)
	f.Add(handMintPayload(f, server, `{"att":[],"aud":"x","exp":1,"fct":[],"iss":"y","prf":[]}`))
	f.Add(handMintPayload(f, server, `{"att":[],"aud":"`+DIDKey(user.Public())+`","exp":1,"fct":[1,"a",{"tenant_id":5,"relays":["r"],"x":{}}],"iss":"`+DIDKey(server.Public())+`","nbf":0,"nnc":"n","prf":["p"]}`))
	f.Add("a.b.c")
	f.Add("..")
	f.Add(strings.Repeat(".", 5))
	f.Fuzz(func(t *testing.T, token string) {
		u, err := ParseUCAN(token)
		if err != nil {
			return
		}
		if u.Token != token || !strings.HasPrefix(token, u.SignedData+".") {
			t.Fatalf("token parts inconsistent")
		}
		if token[len(u.SignedData)+1:] != base64.RawURLEncoding.EncodeToString(u.Signature[:]) {
			t.Fatal("signature part does not round trip")
		}
		if DIDKey(u.Issuer) != u.IssuerDID || DIDKey(u.Audience) != u.AudienceDID {
			t.Fatal("DID does not round trip")
		}
		_ = u.Verify()
	})
}

func FuzzParseUnsignedEvent(f *testing.F) {
	obj := `{"content":"Load test 1","created_at":1,"kind":1,"pubkey":"` + nip19PubHex + `","tags":[["p","x"]]}`
	s, _ := json.Marshal(obj)
	f.Add(obj)
	f.Add(string(s))
	f.Add(`{"id":"` + strings.Repeat("0", 64) + `","pubkey":"` + nip19PubHex + `","created_at":1,"kind":1,"tags":[],"content":"\u0000\n"}`)
	f.Add(`"{}"`)
	f.Add(`null`)
	f.Add(`{"kind":1e3}`)
	f.Fuzz(func(t *testing.T, raw string) {
		ev, err := ParseUnsignedEvent(json.RawMessage(raw))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "Invalid event JSON: ") && !strings.HasPrefix(err.Error(), "Invalid event format: ") {
				t.Fatalf("error without the wire prefix: %v", err)
			}
			return
		}
		if ev.Kind < 0 || ev.Kind > MaxKind || ev.CreatedAt < 0 || ev.Tags == nil {
			t.Fatalf("out of range event %+v", ev)
		}
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		ev2, err := ParseUnsignedEvent(b)
		if err != nil {
			t.Fatalf("re-parse of %s: %v", b, err)
		}
		id1 := EventID(ev.PubKey, ev.CreatedAt, ev.Kind, ev.Tags, ev.Content)
		id2 := EventID(ev2.PubKey, ev2.CreatedAt, ev2.Kind, ev2.Tags, ev2.Content)
		if id1 != id2 {
			t.Fatal("event id changed across a JSON round trip")
		}
	})
}

func FuzzNIP44Decrypt(f *testing.F) {
	ck := [32]byte(mustHex(f, "c41c775356fd92eadc63ff5a0dc1da211b268cbea22316767095b2871ea1412d"))
	for _, msg := range []string{"a", "hello world", strings.Repeat("x", 300)} {
		p, _ := NIP44Encrypt(msg, ck, nil)
		f.Add(p)
	}
	f.Add("#Atqupco0WyaOW2IGDKcshwxI9xO8HgD/P8Ddt46CbxDbrhdG8VmJdU0MIDf06CUvEvdnr1cp1fiMtlM/GrE92xAc1K5odTpCzUB+mjXgbaqtntBUbTToSUoT0ovrlPwzGjyp")
	f.Add("")
	f.Add(strings.Repeat("A", 132))
	f.Fuzz(func(t *testing.T, payload string) {
		plain, err := NIP44Decrypt(payload, ck)
		if err != nil {
			return
		}
		raw, _ := base64.StdEncoding.DecodeString(payload)
		nonce := [32]byte(raw[1:33])
		again, err := NIP44Encrypt(plain, ck, &nonce)
		if err != nil {
			t.Fatal(err)
		}
		if again != payload {
			// Non-canonical base64 (e.g. trailing bits) decodes to the same
			// bytes; compare bytes, not text.
			b2, _ := base64.StdEncoding.DecodeString(again)
			if string(b2) != string(raw) {
				t.Fatal("decrypt/encrypt does not round trip")
			}
		}
	})
}

func FuzzNIP04Decrypt(f *testing.F) {
	sk1, sk2 := SecretKey(hex32(f, nip04Sk1)), SecretKey(hex32(f, nip04Sk2))
	pk1 := sk1.Public()
	f.Add(nip04Ciphertext)
	f.Add("?iv=")
	f.Add("AAAAAAAAAAAAAAAAAAAAAA==?iv=AAAAAAAAAAAAAAAAAAAAAA==")
	f.Fuzz(func(t *testing.T, payload string) {
		_, _ = NIP04Decrypt(sk2, pk1, payload)
	})
}

func FuzzParseSecretKey(f *testing.F) {
	f.Add(nip19Nsec)
	f.Add(nip19SecHex)
	f.Add(strings.ToUpper(nip19Nsec))
	f.Add("nsec1")
	f.Add(strings.Repeat("f", 64))
	f.Fuzz(func(t *testing.T, s string) {
		sk, err := ParseSecretKey(s)
		if err != nil {
			return
		}
		if !sk.Valid() {
			t.Fatal("accepted an invalid scalar")
		}
		back, err := ParseSecretKey(EncodeNsec(sk))
		if err != nil || back != sk {
			t.Fatal("nsec round trip failed")
		}
		back, err = ParseSecretKey(sk.Hex())
		if err != nil || back != sk {
			t.Fatal("hex round trip failed")
		}
	})
}

func FuzzParseDIDKey(f *testing.F) {
	f.Add("did:key:z6DtWJY7BVPDKUFjWWJgLxmNzPF5NSEtE4TVvB4pCE2kb4RK")
	f.Add("did:key:zQ3shokFTS3brHcDQrn82RUDfCZESWL1ZdCEJwekUDPQiYBme")
	f.Add("did:key:z1111")
	f.Add("did:key:z")
	f.Fuzz(func(t *testing.T, s string) {
		pk, err := ParseDIDKey(s)
		if err != nil {
			return
		}
		if DIDKey(pk) != s {
			t.Fatalf("DIDKey(ParseDIDKey(%q)) = %q", s, DIDKey(pk))
		}
	})
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", "\x00\x1f\x7f\"\\", "<>&\u2028", "\xff\xfe", "é😀"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := appendJSONString(nil, s)
		var back string
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("not JSON: %q: %v", out, err)
		}
		if utf8.ValidString(s) && back != s {
			t.Fatalf("round trip %q -> %q", s, back)
		}
		// Agreement with encoding/json on valid input (which escapes more,
		// but must decode to the same string).
		if utf8.ValidString(s) {
			std, _ := json.Marshal(s)
			var stdBack string
			json.Unmarshal(std, &stdBack)
			if stdBack != back {
				t.Fatal("disagrees with encoding/json")
			}
		}
	})
}

func FuzzParseUsersFile(f *testing.F) {
	f.Add(`{"url":"u","created_at":"c","users":[{"pubkey":"` + nip19PubHex + `","email":"e","ucan_token":"t"}]}`)
	f.Add(`{"users":[]}`)
	f.Add(`[`)
	f.Fuzz(func(t *testing.T, data string) {
		uf, err := ParseUsersFile("fuzz.json", []byte(data))
		if err == nil && len(uf.Users) == 0 {
			t.Fatal("accepted a file without users")
		}
	})
}

func FuzzParseServerMetrics(f *testing.F) {
	f.Add(string(AppendMetricsText(nil, func(string) uint64 { return 7 })))
	f.Add("keycast_http_rpc_requests_total 18446744073709551615\n")
	f.Add("<html>")
	f.Fuzz(func(t *testing.T, text string) {
		_ = ParseServerMetrics([]byte(text))
	})
}

func FuzzOriginOf(f *testing.F) {
	for _, s := range []string{"http://localhost:3000/callback", "https://EXAMPLE.com:443/", "http://[::1]/", "divine://x", "http://127.0.0.1:0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, err := OriginOf(s)
		if err != nil {
			return
		}
		if !strings.HasPrefix(o, "https://") && !strings.HasPrefix(o, "http://") {
			t.Fatalf("origin %q has a bad scheme", o)
		}
		o2, err := OriginOf(o + "/path")
		if err != nil || o2 != o {
			t.Fatalf("origin %q is not stable: %q %v", o, o2, err)
		}
	})
}
