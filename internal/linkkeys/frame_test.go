package linkkeys

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// countingReader serves r and records how many bytes were asked for.
type countingReader struct {
	r    io.Reader
	read int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read += n
	return n, err
}

func prefix(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }

func TestReadFrameHeader(t *testing.T) {
	tests := []struct {
		name    string
		in      []byte
		want    uint32
		wantErr error
		exact   bool // error must be exactly wantErr, not wrapped
	}{
		{"value", []byte{0, 0, 0, 0x36}, 54, nil, false},
		{"max uint32", []byte{0xff, 0xff, 0xff, 0xff}, 1<<32 - 1, nil, false},
		{"clean eof", nil, 0, io.EOF, true},
		{"eof inside prefix", []byte{0, 0}, 0, io.ErrUnexpectedEOF, false},
	}
	for _, tt := range tests {
		for _, buffered := range []bool{false, true} {
			name := tt.name
			var r io.Reader = bytes.NewReader(tt.in)
			if buffered {
				name += "/bufio"
				r = bufio.NewReader(r)
			}
			t.Run(name, func(t *testing.T) {
				got, err := ReadFrameHeader(r)
				if tt.wantErr == nil {
					if err != nil || got != tt.want {
						t.Fatalf("ReadFrameHeader = %d, %v; want %d", got, err, tt.want)
					}
					return
				}
				if !errors.Is(err, tt.wantErr) || (tt.exact && err != tt.wantErr) {
					t.Fatalf("ReadFrameHeader error = %v, want %v (exact %v)", err, tt.wantErr, tt.exact)
				}
			})
		}
	}
}

func TestReadFrame(t *testing.T) {
	body := []byte("hello frame")
	tests := []struct {
		name    string
		in      []byte
		max     uint32
		want    []byte
		wantErr error
	}{
		{"body", AppendFrame(nil, body), 0, body, nil},
		{"zero length", prefix(0), 0, []byte{}, nil},
		{"exactly max", prefix(16), 16, nil, io.ErrUnexpectedEOF}, // allowed; fails only for lack of body
		{"one over max", prefix(17), 16, nil, ErrFrameTooLarge},
		{"clean eof", nil, 0, nil, io.EOF},
		{"short body", append(prefix(5), 'a', 'b'), 0, nil, io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadFrame(bytes.NewReader(tt.in), tt.max, nil)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("ReadFrame error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil || !bytes.Equal(got, tt.want) {
				t.Fatalf("ReadFrame = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestReadFrameMaxFrameSizeBoundary(t *testing.T) {
	full := AppendFrame(nil, bytes.Repeat([]byte{7}, MaxFrameSize))
	got, err := ReadFrame(bytes.NewReader(full), MaxFrameSize, nil)
	if err != nil || len(got) != MaxFrameSize {
		t.Fatalf("exactly MaxFrameSize: len %d, %v", len(got), err)
	}
	for _, n := range []uint32{MaxFrameSize + 1, 2 << 20, 1<<32 - 1} {
		cr := &countingReader{r: io.MultiReader(bytes.NewReader(prefix(n)), strings.NewReader("body that must not be read"))}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := ReadFrame(cr, 0, nil)
		runtime.ReadMemStats(&after)
		var fe FrameTooLargeError
		if !errors.As(err, &fe) || fe.Len != n || fe.Max != MaxFrameSize {
			t.Fatalf("len %d: error = %v, want FrameTooLargeError{Len: %d}", n, err, n)
		}
		var pfe *FrameTooLargeError
		if !errors.As(err, &pfe) || pfe.Len != n {
			t.Fatalf("len %d: errors.As with a pointer target failed for %v", n, err)
		}
		if !errors.Is(err, ErrFrameTooLarge) {
			t.Fatalf("len %d: %v does not match ErrFrameTooLarge", n, err)
		}
		if cr.read != 4 {
			t.Fatalf("len %d: read %d bytes, want only the 4-byte prefix", n, cr.read)
		}
		// Rejection must not allocate anything body-sized.
		if got := after.TotalAlloc - before.TotalAlloc; got >= 64<<10 {
			t.Fatalf("len %d: %d bytes allocated on rejection", n, got)
		}
		want := "linkkeys: frame length " + strconv.FormatUint(uint64(n), 10) + " exceeds maximum 1048576"
		if !strings.HasPrefix(err.Error(), want) {
			t.Fatalf("message %q, want prefix %q", err, want)
		}
	}
}

func TestReadFrameReusesBuffer(t *testing.T) {
	buf := make([]byte, 0, 64)
	for _, buffered := range []bool{false, true} {
		var r io.Reader = bytes.NewReader(AppendFrame(AppendFrame(nil, []byte("one")), []byte("three")))
		if buffered {
			r = bufio.NewReader(r)
		}
		for _, want := range []string{"one", "three"} {
			got, err := ReadFrame(r, 0, buf)
			if err != nil || string(got) != want {
				t.Fatalf("ReadFrame = %q, %v; want %q", got, err, want)
			}
			if &got[:1][0] != &buf[:1][0] {
				t.Fatal("ReadFrame did not reuse buf although it had room")
			}
		}
		if _, err := ReadFrame(r, 0, buf); err != io.EOF {
			t.Fatalf("after the last frame: %v, want io.EOF", err)
		}
	}
	// Too small a buffer: a fresh slice of exactly the frame length.
	got, err := ReadFrame(bytes.NewReader(AppendFrame(nil, []byte("0123456789"))), 0, make([]byte, 0, 4))
	if err != nil || string(got) != "0123456789" || cap(got) != 10 {
		t.Fatalf("ReadFrame = %q (cap %d), %v", got, cap(got), err)
	}
}

// writeRecorder records every Write call.
type writeRecorder struct{ calls [][]byte }

func (w *writeRecorder) Write(p []byte) (int, error) {
	w.calls = append(w.calls, append([]byte(nil), p...))
	return len(p), nil
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }

func TestWriteFrame(t *testing.T) {
	for _, body := range [][]byte{nil, []byte("x"), bytes.Repeat([]byte{1}, 100_000)} {
		var w writeRecorder
		if err := WriteFrame(&w, body); err != nil {
			t.Fatal(err)
		}
		if len(w.calls) != 1 {
			t.Fatalf("WriteFrame made %d Write calls, want 1", len(w.calls))
		}
		if want := AppendFrame(nil, body); !bytes.Equal(w.calls[0], want) {
			t.Fatalf("WriteFrame wrote %x..., want %x...", w.calls[0][:4], want[:4])
		}
	}
	if err := WriteFrame(failWriter{}, []byte("x")); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("write error = %v, want it to wrap io.ErrClosedPipe", err)
	}
	err := WriteFrame(&writeRecorder{}, make([]byte, MaxFrameSize+1))
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("oversized body: %v, want ErrFrameTooLarge", err)
	}
}

func TestAppendEnvelopeFrames(t *testing.T) {
	req := Request{Service: "DomainKeys", Op: "get-domain-keys", Payload: []byte{0xa0}}
	resp := Response{Status: StatusUnavailable, Error: RateLimitedMessage(1), HasError: true}
	head := []byte("already there")
	if got, want := AppendRequestFrame(head, &req), AppendFrame(head, AppendRequest(nil, &req)); !bytes.Equal(got, want) {
		t.Fatalf("AppendRequestFrame = %x\nwant                %x", got, want)
	}
	if got, want := AppendResponseFrame(head, &resp), AppendFrame(head, AppendResponse(nil, &resp)); !bytes.Equal(got, want) {
		t.Fatalf("AppendResponseFrame = %x\nwant                 %x", got, want)
	}
	frame := AppendRequestFrame(nil, &req)
	if !bytes.Equal(frame[:4], []byte{0, 0, 0, 0x36}) {
		t.Fatalf("prefix %x, want 00000036", frame[:4])
	}
}
