package keycast

import (
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// vectorFile returns the path of an official vector file in testdata/. A
// missing file fails the test: the vectors are part of the repository.
func vectorFile(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join("testdata", name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("official test vectors: %v (testdata/README.md says where they come from)", err)
	}
	return p
}

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

func hex32(t testing.TB, s string) [32]byte {
	t.Helper()
	b := mustHex(t, s)
	if len(b) != 32 {
		t.Fatalf("hex %q is %d bytes, want 32", s, len(b))
	}
	return [32]byte(b)
}

type bip340Row struct {
	idx, sk, pk, aux, msg, sig, result, comment string
}

func loadBIP340CSV(t *testing.T) []bip340Row {
	t.Helper()
	f, err := os.Open(vectorFile(t, "bip340-test-vectors.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) < 2 || len(recs[0]) != 8 || recs[0][0] != "index" {
		t.Fatalf("unexpected CSV header %v", recs[0])
	}
	rows := make([]bip340Row, 0, len(recs)-1)
	for _, r := range recs[1:] {
		rows = append(rows, bip340Row{r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]})
	}
	return rows
}

// TestBIP340Vectors checks every row of the official BIP-340 file as it
// stands: a signing row's public key and signature (SignSchnorr for 32-byte
// messages, Signer.SignMessage for every length) must equal the file's, and
// our verifier must agree with the file's TRUE/FALSE on every row.
func TestBIP340Vectors(t *testing.T) {
	rows := loadBIP340CSV(t)
	signed, verified, otherLengths := 0, 0, 0
	for _, row := range rows {
		t.Run("vector"+row.idx, func(t *testing.T) {
			msg := mustHex(t, row.msg)
			pk := PublicKey(hex32(t, row.pk))
			want := [64]byte(mustHex(t, row.sig))
			if row.sk != "" {
				sk := SecretKey(hex32(t, row.sk))
				if got := sk.Public(); got != pk {
					t.Fatalf("public key %X, want %X", got, pk)
				}
				aux := hex32(t, row.aux)
				s := NewSigner(sk)
				sig, err := s.SignMessage(msg, &aux)
				if err != nil {
					t.Fatalf("sign: %v", err)
				}
				if sig != want {
					t.Fatalf("signature\n got %X\nwant %X", sig, want)
				}
				if len(msg) == 32 {
					sig2, err := SignSchnorr(sk, [32]byte(msg), &aux)
					if err != nil || sig2 != want {
						t.Fatalf("SignSchnorr = %X, %v; want %X", sig2, err, want)
					}
				} else {
					otherLengths++
				}
				signed++
			}
			wantOK := row.result == "TRUE"
			if got := VerifySchnorrMessage(pk, msg, want); got != wantOK {
				t.Fatalf("verify = %v, want %v (%s)", got, wantOK, row.comment)
			}
			if len(msg) == 32 {
				if got := VerifySchnorr(pk, [32]byte(msg), want); got != wantOK {
					t.Fatalf("VerifySchnorr = %v, want %v (%s)", got, wantOK, row.comment)
				}
			}
			verified++
		})
	}
	// The current revision has 19 rows, 8 of them signing rows (4 with
	// messages other than 32 bytes); a truncated file must not pass.
	if len(rows) < 19 || signed < 8 || otherLengths < 4 || verified != len(rows) {
		t.Fatalf("too few vectors exercised: %d rows, signed %d (%d of other lengths), verified %d", len(rows), signed, otherLengths, verified)
	}
}

type nip44Vectors struct {
	V2 struct {
		Valid struct {
			GetConversationKey []struct {
				Sec1            string `json:"sec1"`
				Pub2            string `json:"pub2"`
				ConversationKey string `json:"conversation_key"`
			} `json:"get_conversation_key"`
			GetMessageKeys struct {
				ConversationKey string `json:"conversation_key"`
				Keys            []struct {
					Nonce       string `json:"nonce"`
					ChachaKey   string `json:"chacha_key"`
					ChachaNonce string `json:"chacha_nonce"`
					HmacKey     string `json:"hmac_key"`
				} `json:"keys"`
			} `json:"get_message_keys"`
			CalcPaddedLen  [][2]int `json:"calc_padded_len"`
			EncryptDecrypt []struct {
				Sec1            string `json:"sec1"`
				Sec2            string `json:"sec2"`
				ConversationKey string `json:"conversation_key"`
				Nonce           string `json:"nonce"`
				Plaintext       string `json:"plaintext"`
				Payload         string `json:"payload"`
			} `json:"encrypt_decrypt"`
			EncryptDecryptLongMsg []struct {
				ConversationKey string `json:"conversation_key"`
				Nonce           string `json:"nonce"`
				Pattern         string `json:"pattern"`
				Repeat          int    `json:"repeat"`
				PlaintextSHA256 string `json:"plaintext_sha256"`
				PayloadSHA256   string `json:"payload_sha256"`
			} `json:"encrypt_decrypt_long_msg"`
		} `json:"valid"`
		Invalid struct {
			EncryptMsgLengths  []int `json:"encrypt_msg_lengths"`
			GetConversationKey []struct {
				Sec1 string `json:"sec1"`
				Pub2 string `json:"pub2"`
				Note string `json:"note"`
			} `json:"get_conversation_key"`
			Decrypt []struct {
				ConversationKey string `json:"conversation_key"`
				Nonce           string `json:"nonce"`
				Plaintext       string `json:"plaintext"`
				Payload         string `json:"payload"`
				Note            string `json:"note"`
			} `json:"decrypt"`
		} `json:"invalid"`
	} `json:"v2"`
}

func loadNIP44Vectors(t testing.TB) *nip44Vectors {
	t.Helper()
	data, err := os.ReadFile(vectorFile(t, "nip44.vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v nip44Vectors
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return &v
}

func TestNIP44Vectors(t *testing.T) {
	v := loadNIP44Vectors(t).V2

	t.Run("valid/get_conversation_key", func(t *testing.T) {
		if len(v.Valid.GetConversationKey) == 0 {
			t.Fatal("no vectors")
		}
		for i, c := range v.Valid.GetConversationKey {
			got, err := NIP44ConversationKey(SecretKey(hex32(t, c.Sec1)), PublicKey(hex32(t, c.Pub2)))
			if err != nil {
				t.Fatalf("%d: %v", i, err)
			}
			if hex.EncodeToString(got[:]) != c.ConversationKey {
				t.Fatalf("%d: got %x want %s", i, got, c.ConversationKey)
			}
		}
	})

	t.Run("valid/get_message_keys", func(t *testing.T) {
		ck := hex32(t, v.Valid.GetMessageKeys.ConversationKey)
		if len(v.Valid.GetMessageKeys.Keys) == 0 {
			t.Fatal("no vectors")
		}
		for i, k := range v.Valid.GetMessageKeys.Keys {
			key, nonce, hk, err := nip44MessageKeys(&ck, mustHex(t, k.Nonce))
			if err != nil {
				t.Fatal(err)
			}
			if hex.EncodeToString(key[:]) != k.ChachaKey || hex.EncodeToString(nonce[:]) != k.ChachaNonce || hex.EncodeToString(hk[:]) != k.HmacKey {
				t.Fatalf("%d: got %x %x %x", i, key, nonce, hk)
			}
		}
	})

	t.Run("valid/calc_padded_len", func(t *testing.T) {
		if len(v.Valid.CalcPaddedLen) == 0 {
			t.Fatal("no vectors")
		}
		for _, c := range v.Valid.CalcPaddedLen {
			if got := NIP44PaddedLen(c[0]); got != c[1] {
				t.Fatalf("NIP44PaddedLen(%d) = %d, want %d", c[0], got, c[1])
			}
		}
	})

	t.Run("valid/encrypt_decrypt", func(t *testing.T) {
		if len(v.Valid.EncryptDecrypt) == 0 {
			t.Fatal("no vectors")
		}
		for i, c := range v.Valid.EncryptDecrypt {
			sk1, sk2 := SecretKey(hex32(t, c.Sec1)), SecretKey(hex32(t, c.Sec2))
			ck, err := NIP44ConversationKey(sk1, sk2.Public())
			if err != nil {
				t.Fatal(err)
			}
			if hex.EncodeToString(ck[:]) != c.ConversationKey {
				t.Fatalf("%d: conversation key %x, want %s", i, ck, c.ConversationKey)
			}
			ck2, err := NIP44ConversationKey(sk2, sk1.Public())
			if err != nil || ck2 != ck {
				t.Fatalf("%d: conversation key is not symmetric: %x vs %x (%v)", i, ck2, ck, err)
			}
			nonce := hex32(t, c.Nonce)
			payload, err := NIP44Encrypt(c.Plaintext, ck, &nonce)
			if err != nil {
				t.Fatal(err)
			}
			if payload != c.Payload {
				t.Fatalf("%d: payload\n got %s\nwant %s", i, payload, c.Payload)
			}
			plain, err := NIP44Decrypt(c.Payload, ck)
			if err != nil || plain != c.Plaintext {
				t.Fatalf("%d: decrypt = %q, %v; want %q", i, plain, err, c.Plaintext)
			}
		}
	})

	t.Run("valid/encrypt_decrypt_long_msg", func(t *testing.T) {
		if len(v.Valid.EncryptDecryptLongMsg) == 0 {
			t.Fatal("no vectors")
		}
		for i, c := range v.Valid.EncryptDecryptLongMsg {
			plain := strings.Repeat(c.Pattern, c.Repeat)
			if h := sha256.Sum256([]byte(plain)); hex.EncodeToString(h[:]) != c.PlaintextSHA256 {
				t.Fatalf("%d: plaintext hash mismatch", i)
			}
			ck, nonce := hex32(t, c.ConversationKey), hex32(t, c.Nonce)
			payload, err := NIP44Encrypt(plain, ck, &nonce)
			if err != nil {
				t.Fatal(err)
			}
			if h := sha256.Sum256([]byte(payload)); hex.EncodeToString(h[:]) != c.PayloadSHA256 {
				t.Fatalf("%d: payload hash %x, want %s", i, h, c.PayloadSHA256)
			}
			got, err := NIP44Decrypt(payload, ck)
			if err != nil || got != plain {
				t.Fatalf("%d: round trip failed: %v", i, err)
			}
		}
	})

	t.Run("invalid/encrypt_msg_lengths", func(t *testing.T) {
		if len(v.Invalid.EncryptMsgLengths) == 0 {
			t.Fatal("no vectors")
		}
		var ck [32]byte
		ck[0] = 1
		for _, n := range v.Invalid.EncryptMsgLengths {
			if _, err := NIP44Encrypt(strings.Repeat("a", n), ck, nil); err == nil {
				t.Fatalf("length %d: want an error", n)
			}
		}
	})

	t.Run("invalid/get_conversation_key", func(t *testing.T) {
		if len(v.Invalid.GetConversationKey) == 0 {
			t.Fatal("no vectors")
		}
		for _, c := range v.Invalid.GetConversationKey {
			if _, err := NIP44ConversationKey(SecretKey(hex32(t, c.Sec1)), PublicKey(hex32(t, c.Pub2))); err == nil {
				t.Fatalf("%s: want an error", c.Note)
			}
		}
	})

	t.Run("invalid/decrypt", func(t *testing.T) {
		if len(v.Invalid.Decrypt) == 0 {
			t.Fatal("no vectors")
		}
		for _, c := range v.Invalid.Decrypt {
			_, err := NIP44Decrypt(c.Payload, hex32(t, c.ConversationKey))
			if err == nil {
				t.Fatalf("%s: want an error", c.Note)
			}
			var want error
			switch {
			case strings.HasPrefix(c.Note, "unknown encryption version"):
				want = ErrNIP44UnknownVersion
			case c.Note == "invalid MAC":
				want = ErrNIP44InvalidMAC
			case c.Note == "invalid padding":
				want = ErrNIP44InvalidPadding
			default:
				want = ErrNIP44InvalidPayload
			}
			if !errors.Is(err, want) {
				t.Fatalf("%s: error %v, want %v", c.Note, err, want)
			}
		}
	})
}

func TestNIP44VectorCount(t *testing.T) {
	// Guard against a silently truncated vector file.
	v := loadNIP44Vectors(t).V2
	counts := map[string]int{
		"get_conversation_key":         len(v.Valid.GetConversationKey),
		"encrypt_decrypt":              len(v.Valid.EncryptDecrypt),
		"invalid decrypt":              len(v.Invalid.Decrypt),
		"invalid get_conversation_key": len(v.Invalid.GetConversationKey),
	}
	for name, n := range counts {
		if n < 3 {
			t.Errorf("%s has only %s vectors", name, strconv.Itoa(n))
		}
	}
}
