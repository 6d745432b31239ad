package linkkeys

import (
	"bufio"
	"bytes"
	"io"
	"testing"
)

// The request-bench hot path: a client encodes get-domain-keys requests and
// decodes OK responses; the server decodes requests and encodes responses
// around its cached payload.

func BenchmarkAppendRequest(b *testing.B) {
	req := Request{Service: "DomainKeys", Op: "get-domain-keys", Payload: []byte{0xa0}}
	buf := make([]byte, 0, 128)
	b.ReportAllocs()
	b.SetBytes(54)
	for b.Loop() {
		buf = AppendRequest(buf[:0], &req)
	}
}

func BenchmarkDecodeRequest(b *testing.B) {
	in := hexb(b, goldenDomainKeysRequest)
	b.ReportAllocs()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		if _, err := DecodeRequest(in); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendResponse(b *testing.B) {
	resp := Response{Payload: hexb(b, goldenDomainKeysPayload)}
	buf := make([]byte, 0, 128)
	b.ReportAllocs()
	b.SetBytes(84)
	for b.Loop() {
		buf = AppendResponse(buf[:0], &resp)
	}
}

func BenchmarkDecodeResponse(b *testing.B) {
	in := hexb(b, goldenDomainKeysOK)
	b.ReportAllocs()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		if _, err := DecodeResponse(in); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCheckDepth(b *testing.B) {
	in := hexb(b, goldenDomainKeysRequest)
	b.ReportAllocs()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		if err := CheckDepth(in, MaxDepth); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReadFrame(b *testing.B) {
	frame := AppendFrame(nil, hexb(b, goldenDomainKeysOK))
	src := bytes.NewReader(frame)
	br := bufio.NewReader(src)
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	b.SetBytes(int64(len(frame)))
	for b.Loop() {
		src.Reset(frame)
		br.Reset(src)
		if _, err := ReadFrame(br, 0, buf); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkWriteFrame(b *testing.B) {
	body := hexb(b, goldenDomainKeysOK)
	b.ReportAllocs()
	b.SetBytes(int64(len(body) + 4))
	for b.Loop() {
		if err := WriteFrame(io.Discard, body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFxamackerDecodeResponse is the reference library on the same
// bytes, for comparison with BenchmarkDecodeResponse.
func BenchmarkFxamackerDecodeResponse(b *testing.B) {
	in := hexb(b, goldenDomainKeysOK)
	type env struct {
		V       uint64 `cbor:"v"`
		Status  uint64 `cbor:"status"`
		Payload []byte `cbor:"payload"`
	}
	b.ReportAllocs()
	for b.Loop() {
		var e env
		if err := payloadDec.Unmarshal(in, &e); err != nil {
			b.Fatal(err)
		}
	}
}
