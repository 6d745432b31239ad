package keycastserver

import (
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/loadproof/loadproof/internal/httpwire"
)

// Request framing on connections served by net/http.
//
// net/http accepts a request carrying both Content-Length and Transfer-Encoding: chunked: it
// drops Content-Length, reads the chunked body and keeps the connection. A front end that frames
// by Content-Length then sees a different request boundary than this server, and whatever the
// chunked body leaves over is served as a second, hidden request (request smuggling); RFC 9112
// (sections 6.1 and 6.3) says to treat such a request as an error, or at least to close the
// connection after it. net/http also merges repeated identical Content-Length headers. The
// handler cannot tell either case apart (net/http has removed the evidence), so framingGuard
// reads the byte stream in front of net/http, tracks request boundaries the way net/http does,
// and stops the stream at the first request whose framing is not plain: the byte that would
// complete its head is replaced by bytes net/http cannot parse, and nothing follows them.
// net/http then answers 400 Bad Request and closes the connection, so nothing after it is ever
// parsed. A chunked body that net/http might read differently from this guard (bare LF, a CR
// inside a line, trailers) is cut the same way, mid-body: the handler's body read fails and
// net/http closes the connection after the answer.
//
// The guard is stricter than net/http, never looser: where it is unsure it refuses. The fast path
// hands such requests (Transfer-Encoding, a second Content-Length) to net/http, so both paths
// answer them the same way. FuzzFramingGuard checks that net/http never finds a request head
// where the guard did not.

// framing guard states
const (
	fgLeading     = iota // before a request line: up to 4 CR or LF are skipped (net/http does after a POST)
	fgLine               // inside a head line
	fgLineCR             // a head line saw CR; LF must follow
	fgBody               // Content-Length body bytes remain
	fgChunkSize          // inside a chunk-size line
	fgChunkCR            // the chunk-size line saw CR
	fgChunkData          // chunk data bytes remain
	fgChunkDataCR        // after chunk data: CR
	fgChunkDataLF        // after chunk data and CR: LF
	fgLastCR             // after the last chunk's size line: CR of the empty trailer section
	fgLastLF             // its LF
	fgPassThrough        // net/http will refuse this request itself and close
)

// fgCapture is how much of a header line is kept: enough for the names and values that frame a
// body ("content-length", "transfer-encoding", "chunked", 18 digits).
const fgCapture = 48

// fgMaxChunkLine mirrors net/http's limit on a chunk-size line.
const fgMaxChunkLine = 4096

type framingGuard struct {
	net.Conn
	refused atomic.Bool // the stream was refused; Close then lingers
	poison  []byte      // what Read passes on after the refusal point, then nothing

	state   int
	remain  uint64 // body or chunk bytes left
	leading int    // CR/LF skipped before this request line

	// the head being read
	lineNo  int // 0: the request line
	lineLen int // bytes of the current line so far
	colon   int // index of the first ':' in a header line, -1 before it
	spaces  int // spaces in the request line
	capture [fgCapture]byte
	tail    [9]byte // the request line's last 9 bytes (" HTTP/1.1")
	http10  bool
	clCount int
	clValue uint64
	teCount int
	teChunk bool

	// the chunk-size line
	hexDigits int
	chunkSemi bool // after ';' (an extension)
	chunkOWS  bool // after trailing white space

	// tests: the stream offsets at which request heads start, and the start of the request
	// that was refused
	off       int64
	headStart int64
	heads     *[]int64
	refusedAt int64
}

func newFramingGuard(c net.Conn) *framingGuard {
	g := &framingGuard{Conn: c}
	g.startHead()
	return g
}

func (g *framingGuard) startHead() {
	g.state = fgLeading
	g.leading = 0
	g.lineNo, g.lineLen, g.colon, g.spaces = 0, 0, -1, 0
	g.http10 = false
	g.clCount, g.clValue, g.teCount, g.teChunk = 0, 0, 0, false
	g.headStart = g.off
	if g.heads != nil {
		*g.heads = append(*g.heads, g.off)
	}
}

// Read reads from the connection and passes on the bytes up to the first one that would let
// net/http act on a request with refused framing. In that byte's place it passes a few bytes
// that make net/http's parser fail right there (poisonFor), and nothing after them. The refusal
// is not returned as an error because the bytes may have been read ahead while net/http still
// answers an earlier pipelined request: an error then would cancel that request's context. The
// poison is parsed in net/http's own order, after it.
func (g *framingGuard) Read(p []byte) (int, error) {
	if g.refused.Load() {
		if len(g.poison) > 0 {
			n := copy(p, g.poison)
			g.poison = g.poison[n:]
			return n, nil
		}
		// Nothing more is passed on. The read still waits like one on a connection with no
		// more data (whatever arrives is dropped) and ends with the connection's own error: a
		// deadline, or the client closing. net/http reads here only in its background read
		// while it answers an earlier request, and an early error would cancel that request.
		for {
			if _, err := g.Conn.Read(p); err != nil {
				return 0, err
			}
		}
	}
	n, err := g.Conn.Read(p)
	for i := 0; i < n; i++ {
		if g.state == fgBody || g.state == fgChunkData {
			// Skip body bytes in bulk.
			k := uint64(n - i)
			if k > g.remain {
				k = g.remain
			}
			i += int(k) - 1
			g.off += int64(k)
			g.remain -= k
			if g.remain == 0 {
				if g.state == fgBody {
					g.startHead()
				} else {
					g.state = fgChunkDataCR
				}
			}
			continue
		}
		g.off++
		if st := g.state; !g.step(p[i]) {
			g.refused.Store(true)
			g.refusedAt = g.headStart
			g.poison = poisonFor(st)
			m := copy(p[i:], g.poison)
			g.poison = g.poison[m:]
			return i + m, nil
		}
	}
	return n, err
}

// poisonFor returns the bytes that, put where a refused byte was in state st, make net/http
// fail at once without reading further: a NUL or a stray CR completing the line it is in.
func poisonFor(st int) []byte {
	switch st {
	case fgChunkSize:
		return []byte("\r\r\n") // a CR before the line's end: "invalid CR in chunked line"
	case fgChunkCR:
		return []byte("\r\n") // the line's CR is now a stray one
	case fgChunkDataCR:
		return []byte("\x00\x00") // not the CRLF after chunk data
	case fgChunkDataLF:
		return []byte("\x00")
	case fgLastCR:
		return []byte("\x00\x00\r\n\r\n") // a trailer line without a colon
	}
	// A head line (or the trailer's CR) ends in a NUL: an invalid method, name or value, or a
	// line without a colon.
	return []byte("\x00\r\n\r\n")
}

// step advances the state machine by one byte; false refuses the stream at that byte.
func (g *framingGuard) step(c byte) bool {
	switch g.state {
	case fgPassThrough:
		return true
	case fgLeading:
		if c == '\r' || c == '\n' {
			g.leading++
			return g.leading <= 4
		}
		g.state = fgLine
		return g.lineByte(c)
	case fgLine:
		if c == '\r' {
			g.state = fgLineCR
			return true
		}
		if c == '\n' {
			return false // bare LF: net/http takes it as a line end, a front end may not
		}
		return g.lineByte(c)
	case fgLineCR:
		if c != '\n' {
			return false
		}
		return g.endLine()
	case fgChunkSize:
		return g.chunkByte(c)
	case fgChunkCR:
		if c != '\n' || g.hexDigits == 0 {
			return false
		}
		if g.remain == 0 {
			g.state = fgLastCR
		} else {
			g.state = fgChunkData
		}
		return true
	case fgChunkDataCR:
		g.state = fgChunkDataLF
		return c == '\r'
	case fgChunkDataLF:
		g.startChunk()
		return c == '\n'
	case fgLastCR:
		g.state = fgLastLF
		return c == '\r' // trailers are refused: net/http parses them more loosely
	case fgLastLF:
		if c != '\n' {
			return false
		}
		g.startHead()
		return true
	}
	return false
}

// lineByte takes one byte of a head line (not CR or LF).
func (g *framingGuard) lineByte(c byte) bool {
	if c < ' ' && c != '\t' || c == 0x7f {
		return false
	}
	if g.lineNo == 0 {
		if c == ' ' {
			g.spaces++
		}
		copy(g.tail[:], g.tail[1:])
		g.tail[len(g.tail)-1] = c
		g.lineLen++
		return true
	}
	if g.lineLen == 0 && (c == ' ' || c == '\t') {
		return false // obs-fold or white space before a name
	}
	if g.colon < 0 {
		if c == ':' {
			if g.lineLen == 0 {
				return false
			}
			g.colon = g.lineLen
		} else if !httpwire.IsTokenChar(c) {
			return false
		}
	}
	if g.lineLen < fgCapture {
		g.capture[g.lineLen] = c
	}
	g.lineLen++
	return true
}

// endLine finishes a head line at its LF.
func (g *framingGuard) endLine() bool {
	ok, last := g.checkLine()
	g.lineNo++
	g.lineLen, g.colon = 0, -1
	if !ok {
		return false
	}
	if last {
		return g.endHead()
	}
	g.state = fgLine
	return true
}

// checkLine vets the line just ended; last reports the empty line that ends the head.
func (g *framingGuard) checkLine() (ok, last bool) {
	if g.lineNo == 0 {
		if g.lineLen < len(g.tail) || g.spaces != 2 {
			return false, false
		}
		switch string(g.tail[:]) {
		case " HTTP/1.1":
		case " HTTP/1.0":
			g.http10 = true
		default:
			return false, false
		}
		return true, false
	}
	if g.lineLen == 0 {
		return true, true
	}
	if g.colon < 0 {
		return false, false
	}
	if g.colon > len("transfer-encoding") {
		return true, false // a name that frames nothing
	}
	n := min(g.lineLen, fgCapture)
	name, value := g.capture[:g.colon], g.capture[g.colon+1:n]
	isCL, isTE := httpwire.EqualFold(name, "content-length"), httpwire.EqualFold(name, "transfer-encoding")
	if !isCL && !isTE {
		return true, false
	}
	if g.lineLen > fgCapture {
		return false, false // too long to be a value we accept
	}
	value = httpwire.TrimOWS(value)
	if isTE {
		g.teCount++
		g.teChunk = httpwire.EqualFold(value, "chunked")
		return true, false
	}
	g.clCount++
	if len(value) == 0 || len(value) > 18 {
		return false, false
	}
	var v uint64
	for _, d := range value {
		if d < '0' || d > '9' {
			return false, false
		}
		v = v*10 + uint64(d-'0')
	}
	g.clValue = v
	return true, false
}

// endHead decides a complete head's framing.
func (g *framingGuard) endHead() bool {
	switch {
	case g.clCount > 1, g.teCount > 0 && g.clCount > 0, g.teCount > 1:
		return false
	case g.teCount == 1 && g.http10:
		return false // net/http ignores Transfer-Encoding in HTTP/1.0
	case g.teCount == 1 && !g.teChunk:
		g.state = fgPassThrough // net/http answers 501 and closes
		return true
	case g.teCount == 1:
		g.startChunk()
		return true
	case g.clValue > 0:
		g.state, g.remain = fgBody, g.clValue
		return true
	}
	g.startHead()
	return true
}

func (g *framingGuard) startChunk() {
	g.state = fgChunkSize
	g.remain, g.hexDigits, g.chunkSemi, g.chunkOWS, g.lineLen = 0, 0, false, false, 0
}

// chunkByte takes one byte of a chunk-size line: 1 to 16 hex digits, then optional white space
// to the end, or ';' and an extension (net/http drops extensions). CR ends the line.
func (g *framingGuard) chunkByte(c byte) bool {
	if g.lineLen++; g.lineLen >= fgMaxChunkLine {
		return false
	}
	switch {
	case c == '\r':
		g.state = fgChunkCR
		return true
	case c == '\n':
		return false
	case g.chunkSemi:
		return true
	case c == ' ' || c == '\t':
		g.chunkOWS = true
		return g.hexDigits > 0
	case g.chunkOWS:
		return false // "5 ;x" or "5 6": net/http refuses, so do we
	case c == ';':
		g.chunkSemi = true
		return g.hexDigits > 0
	}
	d, ok := httpwire.HexDigit(c)
	if !ok || g.hexDigits == 16 {
		return false
	}
	g.hexDigits++
	g.remain = g.remain<<4 | uint64(d)
	return true
}

// CloseWrite lets net/http half-close as it does for a bare *net.TCPConn.
func (g *framingGuard) CloseWrite() error {
	if cw, ok := g.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// Close closes the connection. After a refusal it first half-closes and reads what the client
// still sends for a moment, so that closing with unread bytes (the hidden request) does not
// reset the connection before the client has read the 400.
func (g *framingGuard) Close() error {
	if g.refused.Load() {
		lingerClose(g.Conn)
	}
	return g.Conn.Close()
}

// lingerTime is how long lingerClose waits for the client to finish; net/http waits as long
// before closing a connection whose request it could not read.
const lingerTime = 500 * time.Millisecond

// lingerClose half-closes c and drains it for up to lingerTime (and 256 KiB), so that the
// answer already written reaches the client before the close resets the connection.
func lingerClose(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	c.SetReadDeadline(time.Now().Add(lingerTime))
	io.CopyN(io.Discard, c, 256<<10)
}
