package linkkeys

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/fxamacker/cbor/v2"
)

// hexb decodes a hex string that may contain spaces.
func hexb(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatalf("bad hex in test table: %v", err)
	}
	return b
}

func ptr[T any](v T) *T { return &v }

// refEnc is the reference encoder the hand-written envelope code is checked
// against: fxamacker core deterministic encoding.
var refEnc = func() cbor.EncMode {
	em, err := cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		panic(err)
	}
	return em
}()

// fxEncodeRequest encodes r through fxamacker, as a map with the same keys.
func fxEncodeRequest(t testing.TB, r *Request) []byte {
	t.Helper()
	m := map[string]any{
		"v":       uint64(1),
		"service": r.Service,
		"op":      r.Op,
		"payload": cbor.Tag{Number: 24, Content: nonNil(r.Payload)},
	}
	if r.ID != nil {
		m["id"] = *r.ID
	}
	if r.Auth != nil {
		m["auth"] = *r.Auth
	}
	b, err := refEnc.Marshal(m)
	if err != nil {
		t.Fatalf("fxamacker encode: %v", err)
	}
	return b
}

func fxEncodeResponse(t testing.TB, r *Response) []byte {
	t.Helper()
	m := map[string]any{
		"v":       uint64(1),
		"status":  uint64(r.Status),
		"payload": cbor.Tag{Number: 24, Content: nonNil(r.Payload)},
	}
	if r.ID != nil {
		m["id"] = *r.ID
	}
	if r.HasError || r.Error != "" {
		m["error"] = r.Error
	}
	if r.Variant != "" {
		m["variant"] = r.Variant
	}
	b, err := refEnc.Marshal(m)
	if err != nil {
		t.Fatalf("fxamacker encode: %v", err)
	}
	return b
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// fxDecode decodes an envelope through fxamacker into a generic map and
// pulls out the payload bytes under tag 24.
func fxDecode(t testing.TB, b []byte) (map[string]any, []byte) {
	t.Helper()
	var m map[string]any
	if err := cbor.Unmarshal(b, &m); err != nil {
		t.Fatalf("fxamacker decode of %x: %v", b, err)
	}
	tag, ok := m["payload"].(cbor.Tag)
	if !ok || tag.Number != 24 {
		t.Fatalf("fxamacker: payload is %T %v, want tag 24", m["payload"], m["payload"])
	}
	p, ok := tag.Content.([]byte)
	if !ok {
		t.Fatalf("fxamacker: tag 24 content is %T, want []byte", tag.Content)
	}
	return m, p
}

func requestsEqual(a, b Request) bool {
	return a.Service == b.Service && a.Op == b.Op && bytes.Equal(a.Payload, b.Payload) &&
		eqPtr(a.ID, b.ID) && eqPtr(a.Auth, b.Auth)
}

func responsesEqual(a, b Response) bool {
	return a.Status == b.Status && bytes.Equal(a.Payload, b.Payload) && a.Error == b.Error &&
		a.HasError == b.HasError && a.Variant == b.Variant && eqPtr(a.ID, b.ID)
}

func eqPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}
