package linkkeys

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
)

// MaxFrameSize is the largest frame body either side accepts: exactly 1 MiB
// is allowed, anything larger is rejected before a buffer is allocated.
const MaxFrameSize = 1 << 20

// frameHeaderSize is the length of the big-endian length prefix.
const frameHeaderSize = 4

// ErrFrameTooLarge is matched (errors.Is) by every [FrameTooLargeError].
var ErrFrameTooLarge = errors.New("linkkeys: frame too large")

// FrameTooLargeError reports a length prefix above the accepted maximum. The
// connection cannot be resynchronised after it: close it without a response.
type FrameTooLargeError struct {
	Len uint32 // the announced body length
	Max uint32 // the maximum in force; 0 means MaxFrameSize
}

func (e FrameTooLargeError) Error() string {
	m := e.Max
	if m == 0 {
		m = MaxFrameSize
	}
	return fmt.Sprintf("linkkeys: frame length %d exceeds maximum %d; the peer sent an oversized or corrupt frame, close the connection", e.Len, m)
}

// Unwrap lets errors.Is(err, ErrFrameTooLarge) match.
func (e FrameTooLargeError) Unwrap() error { return ErrFrameTooLarge }

// As lets errors.As fill a *FrameTooLargeError target as well as a
// FrameTooLargeError one.
func (e FrameTooLargeError) As(target any) bool {
	if p, ok := target.(**FrameTooLargeError); ok {
		c := e
		*p = &c
		return true
	}
	return false
}

// ReadFrameHeader reads one 4-byte big-endian length prefix. It returns io.EOF
// unwrapped when the stream ends cleanly before the first byte, and
// io.ErrUnexpectedEOF (wrapped) when it ends inside the prefix. With a
// *bufio.Reader it does not allocate.
func ReadFrameHeader(r io.Reader) (uint32, error) {
	if br, ok := r.(*bufio.Reader); ok {
		p, err := br.Peek(frameHeaderSize)
		if len(p) == frameHeaderSize {
			n := binary.BigEndian.Uint32(p)
			_, _ = br.Discard(frameHeaderSize)
			return n, nil
		}
		return 0, headerErr(len(p), err)
	}
	var hdr [frameHeaderSize]byte
	return readHeaderInto(r, hdr[:])
}

func readHeaderInto(r io.Reader, hdr []byte) (uint32, error) {
	n, err := io.ReadFull(r, hdr[:frameHeaderSize])
	if n == frameHeaderSize {
		return binary.BigEndian.Uint32(hdr), nil
	}
	return 0, headerErr(n, err)
}

func headerErr(got int, err error) error {
	if got == 0 && (err == io.EOF || err == nil) {
		return io.EOF
	}
	if err == io.EOF || err == nil {
		err = io.ErrUnexpectedEOF
	}
	if got == 0 {
		return fmt.Errorf("linkkeys: reading frame length prefix: %w", err)
	}
	return fmt.Errorf("linkkeys: reading frame length prefix: got %d of 4 bytes: %w", got, err)
}

// ReadFrame reads one frame and returns its body. It checks the announced
// length against max (0 means [MaxFrameSize]) before allocating and returns a
// [FrameTooLargeError] when it is larger. The body is read into buf when
// cap(buf) is large enough, otherwise into a new slice of exactly the
// announced length. A clean EOF before the prefix returns io.EOF unwrapped.
func ReadFrame(r io.Reader, max uint32, buf []byte) ([]byte, error) {
	if max == 0 {
		max = MaxFrameSize
	}
	var n uint32
	var err error
	if cap(buf) >= frameHeaderSize {
		if br, ok := r.(*bufio.Reader); ok {
			n, err = ReadFrameHeader(br)
		} else {
			n, err = readHeaderInto(r, buf[:frameHeaderSize])
		}
	} else {
		n, err = ReadFrameHeader(r)
	}
	if err != nil {
		return nil, err
	}
	if n > max {
		return nil, FrameTooLargeError{Len: n, Max: max}
	}
	var body []byte
	if uint64(cap(buf)) >= uint64(n) {
		body = buf[:n]
	} else {
		body = make([]byte, n)
	}
	if got, err := io.ReadFull(r, body); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("linkkeys: reading frame body: got %d of %d bytes: %w", got, n, err)
	}
	return body, nil
}

// AppendFrame appends the 4-byte big-endian length of body and body to dst.
// The caller is responsible for keeping body within MaxFrameSize.
func AppendFrame(dst, body []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(body)))
	return append(dst, body...)
}

// AppendRequestFrame appends r as a complete frame (prefix and envelope)
// to dst without an intermediate buffer.
func AppendRequestFrame(dst []byte, r *Request) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = AppendRequest(dst, r)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-frameHeaderSize))
	return dst
}

// AppendResponseFrame appends r as a complete frame (prefix and envelope)
// to dst without an intermediate buffer. The caller checks the result
// against MaxFrameSize+4 when the payload size is not bounded.
func AppendResponseFrame(dst []byte, r *Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = AppendResponse(dst, r)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-frameHeaderSize))
	return dst
}

var framePool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// WriteFrame writes prefix and body with a single Write call, so that a
// frame never straddles two TLS records because of this package. It refuses
// bodies larger than MaxFrameSize, which the peer would reject anyway.
func WriteFrame(w io.Writer, body []byte) error {
	if len(body) > MaxFrameSize {
		return fmt.Errorf("linkkeys: writing frame: %w", FrameTooLargeError{Len: uint32(min(uint64(len(body)), math.MaxUint32)), Max: MaxFrameSize})
	}
	bp := framePool.Get().(*[]byte)
	b := AppendFrame((*bp)[:0], body)
	_, err := w.Write(b)
	if cap(b) <= 64<<10 {
		*bp = b[:0]
		framePool.Put(bp)
	}
	if err != nil {
		return fmt.Errorf("linkkeys: writing frame of %d bytes: %w", len(body), err)
	}
	return nil
}
