package linkkeys

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"
)

func envelopeSeeds(f *testing.F) {
	for _, h := range []string{goldenDomainKeysRequest, goldenHelloRequest, goldenHelloOK, goldenRateLimited, goldenUnknownOp, goldenDomainKeysOK} {
		f.Add(hexb(f, h))
	}
	id := uint64(7)
	auth := "user.secret"
	f.Add(AppendRequest(nil, &Request{Service: "Admin", Op: "list-users", Payload: []byte{0xa0}, ID: &id, Auth: &auth}))
	f.Add(AppendResponse(nil, &Response{Status: 64, Variant: "X", ID: &id, HasError: true}))
	f.Add(pairs("service", text("S"), "zz", "\x82\x01\xa0", "op", text("o"), "payload", tag24(0xa0), "v", uintv(1)))
	f.Add([]byte{})
	f.Add([]byte{0xa0})
	f.Add([]byte{0xbf, 0xff})
}

func FuzzDecodeRequest(f *testing.F) {
	envelopeSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = CheckDepth(b, MaxDepth)
		r, err := DecodeRequest(b)
		if err != nil {
			if !errors.Is(err, ErrMalformedEnvelope) {
				t.Fatalf("error %v does not match ErrMalformedEnvelope", err)
			}
			return
		}
		enc := AppendRequest(nil, &r)
		if ref := fxEncodeRequest(t, &r); !bytes.Equal(enc, ref) {
			t.Fatalf("re-encoding differs from the reference:\n got %x\nwant %x", enc, ref)
		}
		back, err := DecodeRequest(enc)
		if err != nil {
			t.Fatalf("re-encoded request does not decode: %v", err)
		}
		if !requestsEqual(back, r) {
			t.Fatalf("round trip changed the request: %+v -> %+v", r, back)
		}
	})
}

func FuzzDecodeResponse(f *testing.F) {
	envelopeSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeResponse(b)
		if err != nil {
			if !errors.Is(err, ErrMalformedEnvelope) {
				t.Fatalf("error %v does not match ErrMalformedEnvelope", err)
			}
			return
		}
		enc := AppendResponse(nil, &r)
		if ref := fxEncodeResponse(t, &r); !bytes.Equal(enc, ref) {
			t.Fatalf("re-encoding differs from the reference:\n got %x\nwant %x", enc, ref)
		}
		back, err := DecodeResponse(enc)
		if err != nil {
			t.Fatalf("re-encoded response does not decode: %v", err)
		}
		if !responsesEqual(back, r) {
			t.Fatalf("round trip changed the response: %+v -> %+v", r, back)
		}
	})
}

func FuzzCheckDepth(f *testing.F) {
	envelopeSeeds(f)
	f.Add(nested(0x81, 70, []byte{0x80}))
	f.Add([]byte{0x83, 0x01, 0x02})
	f.Add([]byte{0xd8, 0x18})
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, max := range []int{MaxDepth, 2} {
			got := CheckDepth(b, max)
			if got != nil && !errors.Is(got, ErrExcessiveDepth) && !errors.Is(got, ErrMalformedCBOR) {
				t.Fatalf("unclassified error %v", got)
			}
			if ref := refCheckDepth(b, max); (got == nil) != (ref == nil) {
				t.Fatalf("CheckDepth(%x, %d) = %v, reference scan = %v", b, max, got, ref)
			}
		}
	})
}

func FuzzReadFrame(f *testing.F) {
	f.Add([]byte{}, uint32(0))
	f.Add(AppendFrame(nil, []byte("abc")), uint32(3))
	f.Add(AppendFrame(nil, []byte("abc")), uint32(2))
	f.Add(append(AppendFrame(nil, []byte("x")), 0, 0), uint32(0))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1}, uint32(0))
	f.Fuzz(func(t *testing.T, in []byte, max uint32) {
		limit := max
		if limit == 0 {
			limit = MaxFrameSize
		}
		for _, buffered := range []bool{false, true} {
			var r io.Reader = bytes.NewReader(in)
			if buffered {
				r = bufio.NewReaderSize(r, 16)
			}
			buf := make([]byte, 0, 8)
			consumed := 0
			for {
				body, err := ReadFrame(r, max, buf)
				if err == io.EOF {
					if consumed != len(in) {
						t.Fatalf("io.EOF after %d of %d bytes", consumed, len(in))
					}
					break
				}
				if err != nil {
					var fe FrameTooLargeError
					if errors.As(err, &fe) && fe.Len <= limit {
						t.Fatalf("frame of %d bytes rejected with max %d", fe.Len, limit)
					}
					break
				}
				if uint32(len(body)) > limit {
					t.Fatalf("frame of %d bytes accepted with max %d", len(body), limit)
				}
				if want := in[consumed+4 : consumed+4+len(body)]; !bytes.Equal(body, want) {
					t.Fatalf("body %x, want %x", body, want)
				}
				consumed += 4 + len(body)
			}
		}
	})
}
