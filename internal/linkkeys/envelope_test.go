package linkkeys

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// Golden vectors from docs/protocol-linkkeys.md, Byte vectors.
const (
	goldenDomainKeysRequest = "a4 6176 01 626f70 6f 6765742d646f6d61696e2d6b657973 677061796c6f6164 d818 41 a0 67736572766963 65 6a 446f6d61696e4b657973"
	goldenHelloRequest      = "a4617601626f706568656c6c6f677061796c6f6164d81847a1646e616d65f667736572766963656548656c6c6f"
	goldenHelloOK           = "a36176016673746174757300677061796c6f6164d8185818a1686772656574696e676d48656c6c6f2c20776f726c6421"
	goldenRateLimited       = "a4617601656572726f72782452617465206c696d697465642e2054727920616761696e20696e2031207365636f6e64736673746174757307677061796c6f6164d81840"
	goldenUnknownOp         = "a4617601656572726f727822556e6b6e6f776e20736572766963652f6f7065726174696f6e3a20466f6f2f6261726673746174757302677061796c6f6164d81840"
	goldenDomainKeysPayload = "a3 646b657973 80 66646f6d61696e 6e 6c6f6164746573742e6c6f63616c 781c 726563656e745f7265766f636174696f6e735f617661696c61626c65 f4"
	goldenDomainKeysOK      = "a3 6176 01 66737461747573 00 677061796c6f6164 d818 583c " + goldenDomainKeysPayload
)

func TestGoldenRequests(t *testing.T) {
	helloPayload, err := EncodePayload(HelloRequest{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		req     Request
		want    string
		wantLen int
	}{
		{"get-domain-keys", Request{Service: "DomainKeys", Op: "get-domain-keys", Payload: []byte{0xa0}}, goldenDomainKeysRequest, 54},
		{"hello", Request{Service: "Hello", Op: "hello", Payload: helloPayload}, goldenHelloRequest, 45},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := hexb(t, tt.want)
			if len(want) != tt.wantLen {
				t.Fatalf("test table: vector is %d bytes, reference says %d", len(want), tt.wantLen)
			}
			got := AppendRequest(nil, &tt.req)
			if !bytes.Equal(got, want) {
				t.Fatalf("AppendRequest = %x\nwant            %x", got, want)
			}
			if ref := fxEncodeRequest(t, &tt.req); !bytes.Equal(ref, want) {
				t.Fatalf("fxamacker reference = %x\nwant                  %x", ref, want)
			}
			dec, err := DecodeRequest(want)
			if err != nil {
				t.Fatalf("DecodeRequest: %v", err)
			}
			if !requestsEqual(dec, tt.req) {
				t.Fatalf("DecodeRequest = %+v, want %+v", dec, tt.req)
			}
			m, p := fxDecode(t, want)
			if m["service"] != tt.req.Service || m["op"] != tt.req.Op || m["v"] != uint64(1) || !bytes.Equal(p, tt.req.Payload) {
				t.Fatalf("fxamacker decode = %v", m)
			}
		})
	}
	// The wire form of the get-domain-keys request, with its prefix.
	frame := AppendFrame(nil, AppendRequest(nil, &tests[0].req))
	if !bytes.HasPrefix(frame, hexb(t, "00000036")) {
		t.Fatalf("frame prefix = %x, want 00000036", frame[:4])
	}
}

func TestGoldenResponses(t *testing.T) {
	hello, err := EncodePayload(HelloResponse{Greeting: "Hello, world!"})
	if err != nil {
		t.Fatal(err)
	}
	dk, err := EncodePayload(GetDomainKeysResponse{Domain: "loadtest.local", RecentRevocationsAvailable: ptr(false)})
	if err != nil {
		t.Fatal(err)
	}
	if want := hexb(t, goldenDomainKeysPayload); !bytes.Equal(dk, want) || len(dk) != 60 {
		t.Fatalf("get-domain-keys payload = %x (%d bytes)\nwant                      %x (60 bytes)", dk, len(dk), want)
	}
	tests := []struct {
		name    string
		resp    Response
		encoded []byte // from the convenience constructor
		want    string
	}{
		{"hello ok", Response{Payload: hello}, OKResponse(hello), goldenHelloOK},
		{"rate limited", Response{Status: StatusUnavailable, Error: "Rate limited. Try again in 1 seconds", HasError: true, Payload: []byte{}},
			ErrorResponse(StatusUnavailable, RateLimitedMessage(1)), goldenRateLimited},
		{"unknown op", Response{Status: StatusUnknownServiceOrOp, Error: "Unknown service/operation: Foo/bar", HasError: true, Payload: []byte{}},
			ErrorResponse(StatusUnknownServiceOrOp, UnknownOpMessage("Foo", "bar")), goldenUnknownOp},
		{"get-domain-keys ok", Response{Payload: dk}, OKResponse(dk), goldenDomainKeysOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := hexb(t, tt.want)
			if got := AppendResponse(nil, &tt.resp); !bytes.Equal(got, want) {
				t.Fatalf("AppendResponse = %x\nwant             %x", got, want)
			}
			if !bytes.Equal(tt.encoded, want) {
				t.Fatalf("constructor = %x\nwant          %x", tt.encoded, want)
			}
			if ref := fxEncodeResponse(t, &tt.resp); !bytes.Equal(ref, want) {
				t.Fatalf("fxamacker reference = %x\nwant                  %x", ref, want)
			}
			dec, err := DecodeResponse(want)
			if err != nil {
				t.Fatalf("DecodeResponse: %v", err)
			}
			if !responsesEqual(dec, tt.resp) {
				t.Fatalf("DecodeResponse = %+v, want %+v", dec, tt.resp)
			}
			m, p := fxDecode(t, want)
			if m["status"] != uint64(tt.resp.Status) || !bytes.Equal(p, tt.resp.Payload) {
				t.Fatalf("fxamacker decode = %v", m)
			}
			if e, ok := m["error"]; ok != tt.resp.HasError || (ok && e != tt.resp.Error) {
				t.Fatalf("fxamacker error key = %v (present %v)", e, ok)
			}
		})
	}
	if n := len(hexb(t, goldenDomainKeysOK)); n != 84 {
		t.Fatalf("test table: get-domain-keys envelope is %d bytes, reference says 84", n)
	}
}

// TestEnvelopeMatchesReference checks the hand-written encoders against
// fxamacker across optional keys and every head width.
func TestEnvelopeMatchesReference(t *testing.T) {
	long := func(n int) string { return strings.Repeat("x", n) }
	ids := []*uint64{nil, ptr(uint64(0)), ptr(uint64(23)), ptr(uint64(24)), ptr(uint64(255)), ptr(uint64(256)),
		ptr(uint64(65535)), ptr(uint64(65536)), ptr(uint64(1<<32 - 1)), ptr(uint64(1 << 32)), ptr(^uint64(0))}
	strs := []string{"", "a", long(23), long(24), long(255), long(256), long(65536)}
	payloads := [][]byte{nil, {}, {0xa0}, bytes.Repeat([]byte{0x01}, 24), bytes.Repeat([]byte{0x02}, 300)}
	for i, id := range ids {
		s := strs[i%len(strs)]
		p := payloads[i%len(payloads)]
		reqs := []Request{
			{Service: s, Op: "op", Payload: p, ID: id},
			{Service: "DomainKeys", Op: s, Payload: p, ID: id, Auth: ptr(s)},
		}
		for _, r := range reqs {
			if got, want := AppendRequest(nil, &r), fxEncodeRequest(t, &r); !bytes.Equal(got, want) {
				t.Fatalf("request %+v:\n got %x\nwant %x", r, got, want)
			}
			dec, err := DecodeRequest(AppendRequest(nil, &r))
			if err != nil || !requestsEqual(dec, r) {
				t.Fatalf("request round trip of %+v: %+v, %v", r, dec, err)
			}
		}
		resps := []Response{
			{Status: Status(i * 7), Payload: p, ID: id},
			{Status: StatusHostExtensionBase + Status(i), Error: s, HasError: true, Variant: s, ID: id},
			{Status: Status(^uint64(0)), HasError: true, Variant: "GetDomainKeysResponse"},
		}
		for _, r := range resps {
			if got, want := AppendResponse(nil, &r), fxEncodeResponse(t, &r); !bytes.Equal(got, want) {
				t.Fatalf("response %+v:\n got %x\nwant %x", r, got, want)
			}
			dec, err := DecodeResponse(AppendResponse(nil, &r))
			if err != nil || !responsesEqual(dec, r) {
				t.Fatalf("response round trip of %+v: %+v, %v", r, dec, err)
			}
		}
	}
}

// pairs builds a CBOR map from already-encoded keys and values in the order
// given, so tests can write envelopes no encoder here would produce.
func pairs(kv ...string) []byte {
	b := appendHead(nil, majMap, uint64(len(kv)/2))
	for i := 0; i < len(kv); i += 2 {
		b = appendText(b, kv[i])
		b = append(b, kv[i+1]...)
	}
	return b
}

func text(s string) string  { return string(appendText(nil, s)) }
func uintv(n uint64) string { return string(appendHead(nil, majUint, n)) }
func tag24(p ...byte) string {
	return string(append(appendHead([]byte{0xd8, 0x18}, majBytes, uint64(len(p))), p...))
}

func TestDecodeRequestAcceptsAnyOrderAndIgnoresUnknownKeys(t *testing.T) {
	b := pairs("service", text("Hello"), "x-extra", "\x82\x01\xa1\x61a\x02", "payload", tag24(0xa0),
		"auth", text("u.s"), "op", text("hello"), "id", uintv(9), "v", uintv(1))
	// A non-text key is ignored too.
	b[0]++
	b = append(b, 0x01, 0x02)
	got, err := DecodeRequest(b)
	if err != nil {
		t.Fatalf("DecodeRequest: %v", err)
	}
	want := Request{Service: "Hello", Op: "hello", Payload: []byte{0xa0}, ID: ptr(uint64(9)), Auth: ptr("u.s")}
	if !requestsEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	// Non-minimal heads are accepted on input (v as 18 01).
	if _, err := DecodeRequest(pairs("v", "\x18\x01", "service", text("S"), "op", text("o"), "payload", tag24())); err != nil {
		t.Fatalf("non-minimal v: %v", err)
	}
}

func TestDecodeResponseMissingPayloadIsEmpty(t *testing.T) {
	r, err := DecodeResponse(pairs("v", uintv(1), "status", uintv(6), "error", text("internal error")))
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != StatusInternal || len(r.Payload) != 0 || !r.HasError || r.Error != "internal error" {
		t.Fatalf("got %+v", r)
	}
}

func TestDecodeRequestRejects(t *testing.T) {
	ok := []string{"v", uintv(1), "service", text("S"), "op", text("o"), "payload", tag24(0xa0)}
	with := func(key, val string) []byte {
		kv := append([]string(nil), ok...)
		for i := 0; i < len(kv); i += 2 {
			if kv[i] == key {
				kv[i+1] = val
				return pairs(kv...)
			}
		}
		return pairs(append(kv, key, val)...)
	}
	without := func(key string) []byte {
		var kv []string
		for i := 0; i < len(ok); i += 2 {
			if ok[i] != key {
				kv = append(kv, ok[i], ok[i+1])
			}
		}
		return pairs(kv...)
	}
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "empty frame"},
		{"not a map", []byte{0x80}, "want a map"},
		{"truncated head", []byte{0xb8}, "truncated"},
		{"indefinite map", []byte{0xbf, 0xff}, "indefinite"},
		{"map count too large", []byte{0xa9, 0x61, 0x76}, "cannot fit"},
		{"trailing bytes", append(pairs(ok...), 0x00), "1 trailing bytes"},
		{"version 2", with("v", uintv(2)), "unsupported transport version 2"},
		{"version 0", with("v", uintv(0)), "unsupported transport version 0"},
		{"version negative", with("v", "\x20"), "negative"},
		{"version text", with("v", text("1")), `key "v" has CBOR major type 3`},
		{"missing v", without("v"), `missing required key "v"`},
		{"missing service", without("service"), `missing required key "service"`},
		{"missing op", without("op"), `missing required key "op"`},
		{"missing payload", without("payload"), `missing required key "payload"`},
		{"service bytes", with("service", "\x41S"), `key "service" has CBOR major type 2`},
		{"op invalid utf8", with("op", "\x61\xff"), "not valid UTF-8"},
		{"payload untagged", with("payload", "\x41\xa0"), "not a tag-24"},
		{"payload tag 25", with("payload", "\xd8\x19\x41\xa0"), "not a tag-24"},
		{"payload tag wraps text", with("payload", "\xd8\x18\x61a"), "wraps CBOR major type 3"},
		{"payload runs past end", with("payload", "\xd8\x18\x45\xa0"), "runs past the end"},
		{"id text", with("id", text("1")), `key "id" has CBOR major type 3`},
		{"auth int", with("auth", uintv(1)), `key "auth" has CBOR major type 0`},
		{"duplicate op", pairs(append(append([]string(nil), ok...), "op", text("p"))...), `duplicate key "op"`},
		{"unknown key truncated", with("zz", "\x82\x01"), "cannot fit"},
		{"unknown key string past end", with("zz", "\x62a"), "runs past the end"},
		{"unknown key indefinite", with("zz", "\x9f\xff"), "indefinite"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeRequest(tt.in)
			if err == nil {
				t.Fatalf("DecodeRequest(%x) succeeded, want error containing %q", tt.in, tt.want)
			}
			if !errors.Is(err, ErrMalformedEnvelope) {
				t.Errorf("error %v does not match ErrMalformedEnvelope", err)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "linkkeys: ") {
				t.Errorf("error = %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestDecodeResponseRejects(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"missing status", pairs("v", uintv(1), "payload", tag24()), `missing required key "status"`},
		{"missing v", pairs("status", uintv(0), "payload", tag24()), `missing required key "v"`},
		{"negative status", pairs("v", uintv(1), "status", "\x26", "payload", tag24()), "negative"},
		{"version 2", pairs("v", uintv(2), "status", uintv(0), "payload", tag24()), "unsupported transport version 2"},
		{"error not text", pairs("v", uintv(1), "status", uintv(1), "error", uintv(3)), `key "error" has CBOR major type 0`},
		{"variant not text", pairs("v", uintv(1), "status", uintv(0), "variant", "\xf6"), `key "variant" has CBOR major type 7`},
		{"duplicate status", pairs("v", uintv(1), "status", uintv(0), "status", uintv(1)), `duplicate key "status"`},
		{"trailing", append(hexb(t, goldenHelloOK), 0xa0), "1 trailing bytes"},
		{"truncated", hexb(t, goldenHelloOK)[:40], "past the end"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeResponse(tt.in)
			if err == nil || !errors.Is(err, ErrMalformedEnvelope) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("DecodeResponse(%x) error = %v, want one containing %q", tt.in, err, tt.want)
			}
		})
	}
}

func TestDecodeAliasesInput(t *testing.T) {
	b := hexb(t, goldenDomainKeysRequest)
	r, err := DecodeRequest(b)
	if err != nil {
		t.Fatal(err)
	}
	if &r.Payload[0] != &b[bytes.IndexByte(b, 0x41)+1] {
		t.Fatal("Payload does not alias the input buffer")
	}
}

func TestMessages(t *testing.T) {
	tests := []struct{ got, want string }{
		{RateLimitedMessage(1), "Rate limited. Try again in 1 seconds"},
		{RateLimitedMessage(60), "Rate limited. Try again in 60 seconds"},
		{UnknownOpMessage("Foo", "bar"), "Unknown service/operation: Foo/bar"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

func TestStatusString(t *testing.T) {
	tests := []struct {
		s    Status
		want string
	}{
		{StatusOK, "Ok"}, {StatusMalformedEnvelope, "MalformedEnvelope"}, {StatusUnknownServiceOrOp, "UnknownServiceOrOp"},
		{StatusUnauthenticated, "Unauthenticated"}, {StatusForbidden, "Forbidden"}, {StatusVersionUnsupported, "VersionUnsupported"},
		{StatusInternal, "Internal"}, {StatusUnavailable, "Unavailable"}, {StatusDeadlineExceeded, "DeadlineExceeded"},
		{9, "Unassigned(9)"}, {63, "Unassigned(63)"}, {64, "HostExtension(64)"}, {1000, "HostExtension(1000)"},
	}
	for _, tt := range tests {
		if got := tt.s.String(); got != tt.want {
			t.Errorf("Status(%d).String() = %q, want %q", uint64(tt.s), got, tt.want)
		}
	}
}

func TestHotPathsDoNotAllocate(t *testing.T) {
	req := Request{Service: "DomainKeys", Op: "get-domain-keys", Payload: []byte{0xa0}}
	buf := make([]byte, 0, 256)
	if n := testing.AllocsPerRun(100, func() { buf = AppendRequest(buf[:0], &req) }); n != 0 {
		t.Errorf("AppendRequest allocates %.1f times per call", n)
	}
	enc := AppendRequest(nil, &req)
	if n := testing.AllocsPerRun(100, func() { _, _ = DecodeRequest(enc) }); n != 0 {
		t.Errorf("DecodeRequest allocates %.1f times per call", n)
	}
	resp := hexb(t, goldenDomainKeysOK)
	if n := testing.AllocsPerRun(100, func() { _, _ = DecodeResponse(resp) }); n != 0 {
		t.Errorf("DecodeResponse allocates %.1f times per call", n)
	}
	rl := hexb(t, goldenRateLimited)
	if n := testing.AllocsPerRun(100, func() { _, _ = DecodeResponse(rl) }); n != 0 {
		t.Errorf("DecodeResponse of a rate-limit response allocates %.1f times per call", n)
	}
	r := Response{Payload: resp[24:]}
	if n := testing.AllocsPerRun(100, func() { buf = AppendResponse(buf[:0], &r) }); n != 0 {
		t.Errorf("AppendResponse allocates %.1f times per call", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = CheckDepth(enc, MaxDepth) }); n != 0 {
		t.Errorf("CheckDepth allocates %.1f times per call", n)
	}
}
