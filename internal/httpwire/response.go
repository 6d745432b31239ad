package httpwire

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"github.com/loadproof/loadproof/internal/textclip"
	"io"
)

// Limits of ReadResponse. A header or trailer line must also fit the bufio.Reader's buffer.
const (
	// MaxHeaderLines bounds the header lines of one response head, and the trailer lines of a
	// chunked body.
	MaxHeaderLines = 100
	// MaxInterimBytes bounds the interim (1xx) response heads before one final response, taken
	// together. net/http bounds them with all headers by Transport.MaxResponseHeaderBytes
	// (10 MB by default); a server that sends more than this before answering is broken.
	MaxInterimBytes = 64 << 10
	// maxChunkExcess is net/http's bound on chunked-encoding overhead beyond 16 bytes per chunk
	// and twice the chunk's data (internal/chunked.go).
	maxChunkExcess = 16 << 10
)

// Response is what ReadResponse keeps of one final response.
type Response struct {
	Status int    // 200..599, or 101
	Body   []byte // the body, or its first maxBody bytes (the rest is read and dropped)
	// Close says the connection carries no further response: the server asked for it
	// (Connection: close, HTTP/1.0 without keep-alive), the body was delimited by the close, or
	// the status was 101 Switching Protocols.
	Close bool
}

// ErrNoResponse wraps a failure to read the first byte of a response: the connection ended or
// failed before the server answered anything.
var ErrNoResponse = errors.New("httpwire: no response")

// MalformedError is a response that breaks HTTP/1.1 framing or that net/http would refuse.
type MalformedError struct{ Msg string }

func (e *MalformedError) Error() string { return "httpwire: malformed HTTP response: " + e.Msg }

func malformed(format string, args ...any) error {
	return &MalformedError{fmt.Sprintf(format, args...)}
}

// head is what readHead learns from a response head.
type head struct {
	status        int
	http10        bool
	close         bool
	contentLength int64 // -1: none
	chunked       bool
	// splitRisk: Transfer-Encoding beside Content-Length. The connection is not reused after a
	// body framed so; a response that has no body (204, 304) is not framed at all, and net/http
	// keeps its connection.
	splitRisk bool
	size      int // bytes of the head, for the interim bound
}

// ReadResponse reads one response to a request other than HEAD from br. Interim responses
// (100 Continue, 103 Early Hints, any 1xx but 101) are read and skipped, as net/http's Transport
// does, so a proxy's early hints do not fail a request. body is reused for the body when its
// capacity allows; at most maxBody bytes are kept. setCookie, when not nil, is called with each
// Set-Cookie value of the final response (the slice is valid only during the call).
//
// Errors: ErrNoResponse (wrapped) when not a byte arrived, *MalformedError for a response
// net/http would refuse or that this parser does not take (a status outside 100..599, a header
// name that is not a token, a transfer coding other than chunked, trailers naming framing
// fields), io.ErrUnexpectedEOF for a response cut short, and the reader's own errors.
func ReadResponse(br *bufio.Reader, body []byte, maxBody int, setCookie func([]byte)) (Response, error) {
	var h head
	interim := 0
	for first := true; ; first = false {
		var err error
		if h, err = readHead(br, first, setCookie); err != nil {
			return Response{}, err
		}
		if h.status >= 200 || h.status == 101 {
			break
		}
		if interim += h.size; interim > MaxInterimBytes {
			return Response{}, malformed("interim (1xx) responses longer than %d bytes", MaxInterimBytes)
		}
	}
	r := Response{Status: h.status, Close: h.close, Body: body[:0]}
	switch {
	case h.status == 101:
		// The connection now speaks another protocol (we never ask for one): no body, no reuse.
		r.Close = true
		return r, nil
	case h.status == 204 || h.status == 304:
		return r, nil
	}
	r.Close = r.Close || h.splitRisk
	var err error
	switch {
	case h.chunked:
		r.Body, err = readChunked(br, r.Body, maxBody)
	case h.contentLength >= 0:
		r.Body, err = readN(br, r.Body, h.contentLength, maxBody)
	default:
		r.Close = true
		r.Body, err = readToEOF(br, r.Body, maxBody)
	}
	return r, err
}

// readLine reads one line through its LF and returns it without the LF and one CR before it:
// a CR anywhere else stays in the line, where the header checks refuse it as net/textproto does.
func readLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, malformed("line longer than %d bytes", br.Size())
		}
		return line, unexpectedEOF(err)
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

// readHead reads a status line and the header lines after it. With first, a failure before the
// first byte is ErrNoResponse. setCookie is called for a final response only.
func readHead(br *bufio.Reader, first bool, setCookie func([]byte)) (head, error) {
	h := head{contentLength: -1}
	line, err := br.ReadSlice('\n')
	if err != nil {
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			return h, malformed("status line longer than %d bytes", br.Size())
		case first && len(line) == 0:
			return h, fmt.Errorf("%w: %w", ErrNoResponse, err)
		}
		return h, unexpectedEOF(err)
	}
	h.size = len(line)
	line = bytes.TrimSuffix(line[:len(line)-1], []byte{'\r'})
	if err := h.statusLine(line); err != nil {
		return h, err
	}
	if setCookie != nil && h.status < 200 {
		setCookie = nil // cookies of an interim response are not the answer's
	}
	h.close = h.http10
	var clRaw []byte
	teSeen := false
	for n := 0; ; n++ {
		line, err := readLine(br)
		if err != nil {
			return h, err
		}
		h.size += len(line) + 2
		if len(line) == 0 {
			break
		}
		if n == MaxHeaderLines {
			return h, malformed("more than %d header lines", MaxHeaderLines)
		}
		name, val, err := headerLine(line)
		if err != nil {
			return h, err
		}
		switch len(name) {
		case len("content-length"):
			if !EqualFold(name, "content-length") {
				break
			}
			// Repeated lengths must be the same text, as net/http requires.
			if clRaw != nil && !bytes.Equal(val, clRaw) {
				return h, malformed("conflicting Content-Length %q and %q", textclip.Bytes(clRaw, 20), textclip.Bytes(val, 20))
			}
			n, ok := ParseDecimal(val)
			if !ok {
				return h, malformed("bad Content-Length %q", textclip.Bytes(val, 40))
			}
			clRaw, h.contentLength = val, n
		case len("transfer-encoding"):
			if !EqualFold(name, "transfer-encoding") || h.http10 {
				break // HTTP/1.0 has no transfer codings: net/http ignores the header there
			}
			// Like net/http (and nginx): one Transfer-Encoding line, and it says chunked.
			if teSeen || !EqualFold(val, "chunked") {
				return h, malformed("unsupported Transfer-Encoding %q", textclip.Bytes(val, 40))
			}
			teSeen, h.chunked = true, true
		case len("connection"): // and set-cookie
			if EqualFold(name, "connection") {
				if HasToken(val, "close") {
					h.close = true
				} else if h.http10 && HasToken(val, "keep-alive") {
					h.close = false
				}
			} else if setCookie != nil && EqualFold(name, "set-cookie") {
				setCookie(val)
			}
		case len("trailer"):
			if EqualFold(name, "trailer") && (HasToken(val, "content-length") || HasToken(val, "transfer-encoding") || HasToken(val, "trailer")) {
				return h, malformed("trailer %q names a framing field", textclip.Bytes(val, 40))
			}
		}
	}
	if h.chunked {
		// Transfer-Encoding overrides Content-Length (RFC 9112, section 6.3), but the pair may
		// be an attempt at response splitting: the connection is not used again.
		h.splitRisk = h.contentLength >= 0
		h.contentLength = -1
	}
	return h, nil
}

// statusLine parses "HTTP/1.x NNN[ reason]".
func (h *head) statusLine(line []byte) error {
	if len(line) < 12 || string(line[:7]) != "HTTP/1." || line[7] < '0' || line[7] > '9' || line[8] != ' ' {
		return malformed("bad status line %q", textclip.Bytes(line, 40))
	}
	st := line[9:12]
	if st[0] < '1' || st[0] > '5' || st[1] < '0' || st[1] > '9' || st[2] < '0' || st[2] > '9' ||
		(len(line) > 12 && line[12] != ' ') {
		return malformed("bad status code in %q", textclip.Bytes(line, 40))
	}
	h.status = int(st[0]-'0')*100 + int(st[1]-'0')*10 + int(st[2]-'0')
	h.http10 = line[7] == '0'
	return nil
}

// headerLine splits "name: value" and checks it: the name a token, the value free of control
// bytes (HTAB aside). A line starting with white space (obs-fold) has no token name and is
// refused, where net/http would fold it into the previous value. One pass over the line, by
// table: every response header goes through here.
func headerLine(line []byte) (name, val []byte, err error) {
	i := 0
	for i < len(line) && tokenTable[line[i]] {
		i++
	}
	if i == 0 || i == len(line) || line[i] != ':' {
		return nil, nil, malformed("bad header line %q", textclip.Bytes(line, 40))
	}
	name, val = line[:i], line[i+1:]
	for j := plainValueRun(val, 0); j < len(val); j++ {
		if !valueTable[val[j]] {
			return nil, nil, malformed("control byte in header %q", textclip.Bytes(name, 40))
		}
	}
	for len(val) > 0 && (val[0] == ' ' || val[0] == '\t') {
		val = val[1:]
	}
	for len(val) > 0 && (val[len(val)-1] == ' ' || val[len(val)-1] == '\t') {
		val = val[:len(val)-1]
	}
	return name, val, nil
}

func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// grow returns dst with room for n more bytes.
func grow(dst []byte, n int) []byte {
	if cap(dst)-len(dst) >= n {
		return dst
	}
	nd := make([]byte, len(dst), len(dst)+n)
	copy(nd, dst)
	return nd
}

// readN reads an n-byte body, keeping at most the first maxBody bytes.
func readN(br *bufio.Reader, dst []byte, n int64, maxBody int) ([]byte, error) {
	keep := int(min(n, int64(maxBody)))
	dst = grow(dst, keep)
	start := len(dst)
	dst = dst[:start+keep]
	if _, err := io.ReadFull(br, dst[start:]); err != nil {
		return dst[:start], unexpectedEOF(err)
	}
	if rest := n - int64(keep); rest > 0 {
		if _, err := io.CopyN(io.Discard, br, rest); err != nil {
			return dst, unexpectedEOF(err)
		}
	}
	return dst, nil
}

// readChunked reads a chunked body (RFC 9112, section 7.1) with net/http's rules: chunk lines end
// in CRLF with no other CR, the size is 1 to 16 hex digits after trailing white space and any
// extension are cut off, chunk data is followed by exactly CRLF, and the overhead is bounded.
// Trailer lines are checked like header lines and dropped.
func readChunked(br *bufio.Reader, dst []byte, maxBody int) ([]byte, error) {
	var excess int64
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				return dst, malformed("chunk size line longer than %d bytes", br.Size())
			}
			return dst, unexpectedEOF(err)
		}
		if i := bytes.IndexByte(line, '\r'); len(line) < 2 || i != len(line)-2 {
			return dst, malformed("chunk size line %q does not end in CRLF", textclip.Bytes(line, 20))
		}
		line = line[:len(line)-2]
		excess += int64(len(line)) + 2
		sz, _, _ := bytes.Cut(bytes.TrimRight(line, " \t"), []byte{';'})
		size, ok := parseHex(sz)
		if !ok {
			return dst, malformed("bad chunk size %q", textclip.Bytes(line, 20))
		}
		if excess = max(excess-16-2*int64(min(size, 1<<40)), 0); excess > maxChunkExcess {
			return dst, malformed("chunked encoding with more than %d bytes of overhead", maxChunkExcess)
		}
		if size == 0 {
			return dst, readTrailers(br)
		}
		keep := int(min(size, uint64(max(maxBody-len(dst), 0))))
		if keep > 0 {
			dst = grow(dst, keep)
			start := len(dst)
			dst = dst[:start+keep]
			if _, err := io.ReadFull(br, dst[start:]); err != nil {
				return dst[:start], unexpectedEOF(err)
			}
		}
		if rest := size - uint64(keep); rest > 0 {
			if rest > 1<<62 {
				return dst, malformed("chunk size %d too large", size)
			}
			if _, err := io.CopyN(io.Discard, br, int64(rest)); err != nil {
				return dst, unexpectedEOF(err)
			}
		}
		var crlf [2]byte
		if _, err := io.ReadFull(br, crlf[:]); err != nil {
			return dst, unexpectedEOF(err)
		}
		if crlf != [2]byte{'\r', '\n'} {
			return dst, malformed("chunk data not followed by CRLF")
		}
	}
}

// readTrailers reads the trailer section after the last chunk, through its empty line. Unlike
// header lines, every line must end in CRLF: net/http reads trailers only up to a literal
// CRLF CRLF within its buffer.
func readTrailers(br *bufio.Reader) error {
	size := 0
	for n := 0; ; n++ {
		line, err := br.ReadSlice('\n')
		if err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				return malformed("trailer section too long")
			}
			return unexpectedEOF(err)
		}
		if len(line) < 2 || line[len(line)-2] != '\r' {
			return malformed("trailer line %q does not end in CRLF", textclip.Bytes(line, 20))
		}
		line = line[:len(line)-2]
		if len(line) == 0 {
			return nil
		}
		if size += len(line) + 2; n == MaxHeaderLines || size >= br.Size() {
			return malformed("trailer section too long")
		}
		if _, _, err := headerLine(line); err != nil {
			return err
		}
	}
}

// readToEOF reads a body delimited by the end of the connection, keeping at most maxBody bytes.
func readToEOF(br *bufio.Reader, dst []byte, maxBody int) ([]byte, error) {
	for {
		if len(dst) >= maxBody {
			_, err := io.Copy(io.Discard, br)
			return dst, err
		}
		if cap(dst) == len(dst) {
			dst = grow(dst, max(cap(dst), 512))
		}
		n, err := br.Read(dst[len(dst):min(cap(dst), maxBody)])
		dst = dst[:len(dst)+n]
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
}
