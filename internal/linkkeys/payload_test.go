package linkkeys

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

func TestPayloadGolden(t *testing.T) {
	tests := []struct {
		name string
		v    any
		want string
	}{
		{"hello null name", HelloRequest{}, "a1 64 6e616d65 f6"},
		{"hello name", HelloRequest{Name: ptr("LinkKeys")}, "a1 64 6e616d65 68 4c696e6b4b657973"},
		{"hello response", HelloResponse{Greeting: "Hello, world!"}, "a1686772656574696e676d48656c6c6f2c20776f726c6421"},
		{"empty request", struct{}{}, "a0"},
		{"get-domain-keys", GetDomainKeysResponse{Domain: "loadtest.local", RecentRevocationsAvailable: ptr(false)}, goldenDomainKeysPayload},
		{"revocations since absent", GetRevocationsRequest{}, "a0"},
		{"revocations empty", GetRevocationsResponse{}, "a1 6b 7265766f636174696f6e73 80"},
		{"check result", CheckResult{Result: true}, "a1 66 726573756c74 f5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := EncodePayload(tt.v)
			if err != nil {
				t.Fatal(err)
			}
			if want := hexb(t, tt.want); !bytes.Equal(got, want) {
				t.Fatalf("EncodePayload = %x\nwant           %x", got, want)
			}
			back := reflect.New(reflect.TypeOf(tt.v))
			if err := DecodePayload(got, back.Interface()); err != nil {
				t.Fatalf("DecodePayload: %v", err)
			}
			if !reflect.DeepEqual(normalize(back.Elem().Interface()), normalize(tt.v)) {
				t.Fatalf("round trip = %+v, want %+v", back.Elem().Interface(), tt.v)
			}
		})
	}
}

// normalize maps the nil-vs-empty slice difference away for DeepEqual.
func normalize(v any) any {
	if r, ok := v.(GetDomainKeysResponse); ok && len(r.Keys) == 0 {
		r.Keys = nil
		return r
	}
	if r, ok := v.(GetRevocationsResponse); ok && len(r.Revocations) == 0 {
		r.Revocations = nil
		return r
	}
	return v
}

// mapKeys returns the text keys of a top-level CBOR map in wire order.
func mapKeys(t *testing.T, b []byte) []string {
	t.Helper()
	d := decoder{b: b}
	major, n, err := d.head()
	if err != nil || major != majMap {
		t.Fatalf("not a map: %x", b)
	}
	var keys []string
	for ; n > 0; n-- {
		k, ok, err := nextKey(&d)
		if err != nil || !ok {
			t.Fatalf("bad key in %x: %v", b, err)
		}
		keys = append(keys, string(k))
		if err := d.skip(); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

func TestDomainPublicKeyWireOrder(t *testing.T) {
	enc := DomainPublicKey{
		KeyID: "0190a0b0-0000-7000-8000-000000000001", Algorithm: "x25519", KeyUsage: "encrypt",
		CreatedAt: "2026-01-01 00:00:00", ExpiresAt: "2028-01-01T00:00:00Z", PublicKey: bytes.Repeat([]byte{9}, 32),
		RevokedAt: ptr("2026-02-01T00:00:00Z"), Fingerprint: strings.Repeat("ab", 32),
		KeySignature: []byte{1, 2, 3}, SignedByKeyID: ptr("0190a0b0-0000-7000-8000-000000000002"),
	}
	b, err := EncodePayload(enc)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"key_id", "algorithm", "key_usage", "created_at", "expires_at", "public_key", "revoked_at", "fingerprint", "key_signature", "signed_by_key_id"}
	if got := mapKeys(t, b); !reflect.DeepEqual(got, want) {
		t.Fatalf("wire order = %v\nwant         %v", got, want)
	}
	var back DomainPublicKey
	if err := DecodePayload(b, &back); err != nil || !reflect.DeepEqual(back, enc) {
		t.Fatalf("round trip = %+v, %v", back, err)
	}
	// A signing key omits the optional fields.
	enc.RevokedAt, enc.KeySignature, enc.SignedByKeyID = nil, nil, nil
	b, _ = EncodePayload(enc)
	if got := mapKeys(t, b); len(got) != 7 {
		t.Fatalf("signing key keys = %v, want the 7 required ones", got)
	}
	resp, _ := EncodePayload(GetDomainKeysResponse{Keys: []DomainPublicKey{enc}, Domain: "d", RecentRevocationsAvailable: ptr(true)})
	if got := mapKeys(t, resp); !reflect.DeepEqual(got, []string{"keys", "domain", "recent_revocations_available"}) {
		t.Fatalf("GetDomainKeysResponse order = %v", got)
	}
}

func TestHandshakeAndRevocationsRoundTrip(t *testing.T) {
	vals := []any{
		&HandshakeRequest{Version: "v1alpha", Algorithms: HandshakeAlgorithms{Signing: []string{"ed25519"}}},
		&HandshakeResponse{Version: "v1alpha", Algorithms: HandshakeAlgorithms{Signing: []string{"ed25519"}, Encryption: []string{"x25519"}}},
		&GetRevocationsRequest{Since: ptr("2026-01-01T00:00:00Z")},
		&GetRevocationsResponse{Revocations: []Revocation{{TargetKeyID: "k", TargetFingerprint: strings.Repeat("0", 64), RevokedAt: "2026-01-01T00:00:00Z",
			Signatures: []ClaimSignature{{Domain: "d", SignedByKeyID: "k2", Signature: []byte{1}}}}}},
	}
	for _, v := range vals {
		b, err := EncodePayload(v)
		if err != nil {
			t.Fatal(err)
		}
		back := reflect.New(reflect.TypeOf(v).Elem())
		if err := DecodePayload(b, back.Interface()); err != nil || !reflect.DeepEqual(back.Interface(), v) {
			t.Fatalf("%T round trip = %+v, %v", v, back.Interface(), err)
		}
	}
	b, _ := EncodePayload(HandshakeRequest{Version: "v1alpha"})
	if !bytes.Contains(b, []byte("signing\x80")) || bytes.Contains(b, []byte("encryption")) {
		t.Fatalf("nil signing must be [] and nil encryption omitted: %x", b)
	}
}

func TestDecodePayloadRules(t *testing.T) {
	var h HelloRequest
	// Unknown keys are ignored.
	if err := DecodePayload(hexb(t, "a2 64 6e616d65 61 78 65 6578747261 01"), &h); err != nil || h.Name == nil || *h.Name != "x" {
		t.Fatalf("unknown key: %+v, %v", h, err)
	}
	bad := []struct {
		name, in, want string
	}{
		{"trailing bytes", "a0 00", "extraneous"},
		{"empty", "", "EOF"},
		{"wrong type", "a1 64 6e616d65 01", "cannot unmarshal"},
		{"duplicate key", "a2 64 6e616d65 f6 64 6e616d65 f6", "duplicate"},
		{"invalid utf8", "a1 64 6e616d65 61 ff", "UTF-8"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			var h HelloRequest
			err := DecodePayload(hexb(t, tt.in), &h)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "linkkeys: decoding") {
				t.Fatalf("error = %v, want one containing %q", err, tt.want)
			}
		})
	}
	deep := append(bytes.Repeat([]byte{0x81}, MaxDepth+1), 0x80)
	var v any
	if err := DecodePayload(deep, &v); err == nil {
		t.Fatal("nesting deeper than MaxDepth decoded")
	}
}
