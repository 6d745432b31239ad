package keycast

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// Published events whose id and signature were produced by other clients
// (go-nostr's event_test.go and a public Solidity verifier test). Kind 3 has
// JSON content full of quotes, so it pins the string escaping.
var knownEvents = []string{
	`{"id":"dc90c95f09947507c1044e8f48bcf6350aa6bff1507dd4acfc755b9239b5c962","pubkey":"3bf0c63fcb93463407af97a5e5ee64fa883d107ef9e558472c4eb9aaaefa459d","created_at":1644271588,"kind":1,"tags":[],"content":"now that https://blueskyweb.org/blog/2-7-2022-overview was announced we can stop working on nostr?","sig":"230e9d8f0ddaf7eb70b5f7741ccfa37e87a455c9a469282e3464e2052d3192cd63a167e196e381ef9d7e69e9ea43af2443b839974dc85d8aaab9efe1d9296524"}`,
	`{"id":"9e662bdd7d8abc40b5b15ee1ff5e9320efc87e9274d8d440c58e6eed2dddfbe2","pubkey":"373ebe3d45ec91977296a178d9f19f326c70631d2a1b0bbba5c5ecc2eb53b9e7","created_at":1644844224,"kind":3,"tags":[["p","3bf0c63fcb93463407af97a5e5ee64fa883d107ef9e558472c4eb9aaaefa459d"],["p","75fc5ac2487363293bd27fb0d14fb966477d0f1dbc6361d37806a6a740eda91e"],["p","46d0dfd3a724a302ca9175163bdf788f3606b3fd1bb12d5fe055d1e418cb60ea"]],"content":"{\"wss://nostr-pub.wellorder.net\":{\"read\":true,\"write\":true},\"wss://nostr.bitcoiner.social\":{\"read\":false,\"write\":true},\"wss://expensive-relay.fiatjaf.com\":{\"read\":true,\"write\":true},\"wss://relayer.fiatjaf.com\":{\"read\":true,\"write\":true},\"wss://relay.bitid.nz\":{\"read\":true,\"write\":true},\"wss://nostr.rocks\":{\"read\":true,\"write\":true}}","sig":"811355d3484d375df47581cb5d66bed05002c2978894098304f20b595e571b7e01b2efd906c5650080ffe49cf1c62b36715698e9d88b9e8be43029a2f3fa66be"}`,
	`{"id":"54ffbfbb8a4f76991c9f2401943b9b4d4f10084863ec7ea538bad2ded3d56892","pubkey":"2e7b0e5aae374d0ed1fab6cc877a969716ea48a710176a035398635e5d660dc1","created_at":0,"kind":96024,"tags":[],"content":"0000000000000000000000000000000000000000000000000000000000000000","sig":"a35749d6174451de16fb286096858cb33d7b66c9583024fd2a5cd7b57a763ec85d99ddb0711044498c362be7c82e524a9845e09f634bbf11d87fccc2bcfe2202"}`,
}

func TestKnownEvents(t *testing.T) {
	for i, raw := range knownEvents {
		var ev Event
		if err := json.Unmarshal([]byte(raw), &ev); err != nil {
			t.Fatal(err)
		}
		id := EventID(ev.PubKey, ev.CreatedAt, ev.Kind, ev.Tags, ev.Content)
		if hex.EncodeToString(id[:]) != ev.ID {
			t.Fatalf("event %d: id %x, want %s", i, id, ev.ID)
		}
		if err := VerifyEvent(ev); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if got := string(ev.AppendJSON(nil)); got != raw {
			t.Fatalf("event %d: AppendJSON\n got %s\nwant %s", i, got, raw)
		}
		bad := ev
		bad.Content += " "
		if VerifyEvent(bad) == nil {
			t.Fatalf("event %d: changed content still verifies", i)
		}
		bad = ev
		bad.Sig = ev.Sig[:127] + string("0123456789abcdef"[(strings.IndexByte("0123456789abcdef", ev.Sig[127])+1)%16])
		if VerifyEvent(bad) == nil {
			t.Fatalf("event %d: changed signature still verifies", i)
		}
	}
}

// TestEventIDEscaping pins the NIP-01 serialization of awkward strings:
// only \n \" \\ \r \t \b \f get short escapes, other control characters
// \u00xx, and '<', '>', '&', DEL, U+2028 and non-ASCII stay raw.
func TestEventIDEscaping(t *testing.T) {
	tests := []struct {
		content, want string
	}{
		{"plain", `"plain"`},
		{"a\"b\\c", `"a\"b\\c"`},
		{"\n\r\t\b\f", `"\n\r\t\b\f"`},
		{"\x00\x01\x1f\x7f", `"\u0000\u0001\u001f` + "\x7f" + `"`},
		{"<script>&amp;</script>", `"<script>&amp;</script>"`},
		{"héllo ✓ \u2028\u2029 😀", "\"héllo ✓ \u2028\u2029 😀\""},
		{"bad \xff utf8", "\"bad \ufffd utf8\""},
		{"/", `"/"`},
	}
	for _, tc := range tests {
		got := string(appendJSONString(nil, tc.content))
		if got != tc.want {
			t.Errorf("appendJSONString(%q) = %s, want %s", tc.content, got, tc.want)
		}
		var back string
		if err := json.Unmarshal([]byte(got), &back); err != nil {
			t.Errorf("%q: output is not JSON: %v", tc.content, err)
		}
	}
	pre := AppendEventIDPreimage(nil, nip19PubHex, 1700000000, 1, [][]string{{"e", "x\ny"}, {}}, "hi\u2028")
	want := `[0,"` + nip19PubHex + `",1700000000,1,[["e","x\ny"],[]],"hi` + "\u2028" + `"]`
	if string(pre) != want {
		t.Fatalf("preimage\n got %s\nwant %s", pre, want)
	}
}

func TestParseUnsignedEvent(t *testing.T) {
	pub := nip19PubHex
	obj := `{"content":"Load test 1700000000","created_at":1700000000,"kind":1,"pubkey":"` + pub + `","tags":[]}`
	strForm, _ := json.Marshal(obj)
	tests := []struct {
		name    string
		raw     string
		wantErr error
		errText string
	}{
		{"object", obj, nil, ""},
		{"string form", string(strForm), nil, ""},
		{"with id and unknown fields", `{"id":"` + strings.Repeat("A", 64) + `","sig":"x","pubkey":"` + pub + `","created_at":1,"kind":65535,"tags":[["p","x"]],"content":""}`, nil, ""},
		{"missing pubkey", `{"created_at":1,"kind":1,"tags":[],"content":""}`, ErrInvalidEventFormat, "Invalid event format: missing field `pubkey`"},
		{"missing tags", `{"pubkey":"` + pub + `","created_at":1,"kind":1,"content":""}`, ErrInvalidEventFormat, "missing field `tags`"},
		{"null tags", `{"pubkey":"` + pub + `","created_at":1,"kind":1,"tags":null,"content":""}`, ErrInvalidEventFormat, "tags"},
		{"kind too big", `{"pubkey":"` + pub + `","created_at":1,"kind":65536,"tags":[],"content":""}`, ErrInvalidEventFormat, "invalid kind"},
		{"negative created_at", `{"pubkey":"` + pub + `","created_at":-1,"kind":1,"tags":[],"content":""}`, ErrInvalidEventFormat, "invalid created_at"},
		{"float kind", `{"pubkey":"` + pub + `","created_at":1,"kind":1.5,"tags":[],"content":""}`, ErrInvalidEventFormat, "invalid kind"},
		{"bad pubkey", `{"pubkey":"abc","created_at":1,"kind":1,"tags":[],"content":""}`, ErrInvalidEventFormat, "invalid pubkey"},
		{"bad id", `{"id":"xyz","pubkey":"` + pub + `","created_at":1,"kind":1,"tags":[],"content":""}`, ErrInvalidEventFormat, "invalid id"},
		{"number", `42`, ErrInvalidEventFormat, "expected an event object"},
		{"array", `[]`, ErrInvalidEventFormat, "expected an event object"},
		{"tag not strings", `{"pubkey":"` + pub + `","created_at":1,"kind":1,"tags":[[1]],"content":""}`, ErrInvalidEventFormat, "Invalid event format"},
		{"string not json", `"{not json"`, ErrInvalidEventJSON, "Invalid event JSON: "},
		{"string missing field", `"{\"kind\":1}"`, ErrInvalidEventJSON, "Invalid event JSON: missing field `pubkey`"},
		{"empty", ``, ErrInvalidEventFormat, "empty value"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := ParseUnsignedEvent(json.RawMessage(tc.raw))
			if tc.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				if ev.PubKey != pub {
					t.Fatalf("pubkey %s", ev.PubKey)
				}
				return
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.errText) {
				t.Fatalf("err = %q, want it to contain %q", err, tc.errText)
			}
		})
	}
}

func TestSignEvent(t *testing.T) {
	s := NewSigner(SecretKey(hex32(t, nip19SecHex)))
	ev := UnsignedEvent{PubKey: s.Public().Hex(), CreatedAt: 1700000000, Kind: 1, Content: "Load test 1700000000"}
	signed, err := SignEvent(s, ev)
	if err != nil {
		t.Fatal(err)
	}
	if signed.Tags == nil || len(signed.Sig) != 128 || len(signed.ID) != 64 {
		t.Fatalf("bad signed event %+v", signed)
	}
	if err := VerifyEvent(signed); err != nil {
		t.Fatal(err)
	}
	// The JSON of the signed event parses back and still verifies.
	var back Event
	if err := json.Unmarshal(signed.AppendJSON(nil), &back); err != nil {
		t.Fatal(err)
	}
	if err := VerifyEvent(back); err != nil {
		t.Fatal(err)
	}

	// A matching supplied id (any case) is accepted.
	upper := strings.ToUpper(signed.ID)
	ev.ID = &upper
	if _, err := SignEvent(s, ev); err != nil {
		t.Fatalf("matching id refused: %v", err)
	}

	wrongID := strings.Repeat("0", 64)
	ev.ID = &wrongID
	if _, err := SignEvent(s, ev); err == nil || !strings.Contains(err.Error(), "does not match the computed id") {
		t.Fatalf("wrong id: err = %v", err)
	}

	ev.ID = nil
	ev.PubKey = "3bf0c63fcb93463407af97a5e5ee64fa883d107ef9e558472c4eb9aaaefa459d" // not the signer's key
	_, err = SignEvent(s, ev)
	want := "event pubkey " + ev.PubKey + " does not match the signer's pubkey " + s.Public().Hex()
	if err == nil || err.Error() != want {
		t.Fatalf("mismatched pubkey: err = %v, want %q", err, want)
	}
}
