package keycastserver

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/loadproof/loadproof/internal/keycast"
)

// Single-pass decoding of the common /api/nostr bodies. encoding/json validates the body, then
// decodes it, then decodes the event again: about a tenth of a sign_event's CPU. The scanners
// here accept only plain shapes (lower-case keys, each once, strings without escapes, integers
// without sign, fraction or exponent) and report ok=false for anything else, which then goes
// through encoding/json and keycast.ParseUnsignedEvent as before. FuzzFastRPC and
// FuzzEventFast check that whatever the scanners accept, the general decoders accept with the
// same result.

// fastRPC decodes {"method":"…","params":[…]} in one validating pass.
func fastRPC(b []byte) (rpcCall, bool) {
	var c rpcCall
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return c, false
	}
	i = skipWS(b, i+1)
	var haveMethod, haveParams bool
	if i < len(b) && b[i] == '}' {
		return c, false // no method: the general decoder reports it
	}
	for {
		key, j, ok := plainString(b, i)
		if !ok {
			return c, false
		}
		i = skipWS(b, j)
		if i >= len(b) || b[i] != ':' {
			return c, false
		}
		i = skipWS(b, i+1)
		switch key {
		case "method":
			if haveMethod {
				return c, false
			}
			m, j, ok := plainString(b, i)
			if !ok {
				return c, false
			}
			c.method, i, haveMethod = m, j, true
		case "params":
			if haveParams || i >= len(b) || b[i] != '[' {
				return c, false
			}
			i = skipWS(b, i+1)
			if i < len(b) && b[i] == ']' {
				i++
			} else {
				for {
					j, ok := skipValue(b, i, 0)
					if !ok {
						return c, false
					}
					c.params = append(c.params, json.RawMessage(b[i:j:j]))
					i = skipWS(b, j)
					if i < len(b) && b[i] == ',' {
						i = skipWS(b, i+1)
						continue
					}
					if i < len(b) && b[i] == ']' {
						i++
						break
					}
					return c, false
				}
			}
			haveParams = true
		default:
			return c, false
		}
		i = skipWS(b, i)
		if i < len(b) && b[i] == ',' {
			i = skipWS(b, i+1)
			continue
		}
		if i < len(b) && b[i] == '}' {
			i++
			break
		}
		return c, false
	}
	if skipWS(b, i) != len(b) || !haveMethod {
		return c, false
	}
	c.idx = methodIndex(c.method)
	return c, true
}

// fastEventObject decodes an event object whose pubkey is signerHex.
func fastEventObject(b json.RawMessage, signerHex string) (keycast.UnsignedEvent, bool) {
	var ev keycast.UnsignedEvent
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return ev, false
	}
	i = skipWS(b, i+1)
	var seen [6]bool // id, pubkey, created_at, kind, tags, content
	for {
		key, j, ok := plainString(b, i)
		if !ok {
			return ev, false
		}
		i = skipWS(b, j)
		if i >= len(b) || b[i] != ':' {
			return ev, false
		}
		i = skipWS(b, i+1)
		var slot int
		switch key {
		case "id":
			slot = 0
			id, j, ok := plainString(b, i)
			if !ok || len(id) != 64 || !isLowerHex(id) {
				return ev, false
			}
			ev.ID, i = &id, j
		case "pubkey":
			slot = 1
			pk, j, ok := plainString(b, i)
			if !ok || pk != signerHex {
				return ev, false
			}
			ev.PubKey, i = signerHex, j
		case "created_at":
			slot = 2
			n, j, ok := plainUint(b, i)
			if !ok {
				return ev, false
			}
			ev.CreatedAt, i = n, j
		case "kind":
			slot = 3
			n, j, ok := plainUint(b, i)
			if !ok || n > keycast.MaxKind {
				return ev, false
			}
			ev.Kind, i = int(n), j
		case "tags":
			slot = 4
			tags, j, ok := plainTags(b, i)
			if !ok {
				return ev, false
			}
			ev.Tags, i = tags, j
		case "content":
			slot = 5
			s, j, ok := plainString(b, i)
			if !ok {
				return ev, false
			}
			ev.Content, i = s, j
		default:
			return ev, false
		}
		if seen[slot] {
			return ev, false
		}
		seen[slot] = true
		i = skipWS(b, i)
		if i < len(b) && b[i] == ',' {
			i = skipWS(b, i+1)
			continue
		}
		if i < len(b) && b[i] == '}' {
			i++
			break
		}
		return ev, false
	}
	if skipWS(b, i) != len(b) || !seen[1] || !seen[2] || !seen[3] || !seen[4] || !seen[5] {
		return ev, false
	}
	return ev, true
}

// plainTags reads [] or [["a","b"],…] with plain strings.
func plainTags(b []byte, i int) ([][]string, int, bool) {
	if i >= len(b) || b[i] != '[' {
		return nil, 0, false
	}
	tags := [][]string{}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == ']' {
		return tags, i + 1, true
	}
	for {
		if i >= len(b) || b[i] != '[' {
			return nil, 0, false
		}
		tag := []string{}
		i = skipWS(b, i+1)
		if i < len(b) && b[i] == ']' {
			i++
		} else {
			for {
				s, j, ok := plainString(b, i)
				if !ok {
					return nil, 0, false
				}
				tag = append(tag, s)
				i = skipWS(b, j)
				if i < len(b) && b[i] == ',' {
					i = skipWS(b, i+1)
					continue
				}
				if i < len(b) && b[i] == ']' {
					i++
					break
				}
				return nil, 0, false
			}
		}
		tags = append(tags, tag)
		i = skipWS(b, i)
		if i < len(b) && b[i] == ',' {
			i = skipWS(b, i+1)
			continue
		}
		if i < len(b) && b[i] == ']' {
			return tags, i + 1, true
		}
		return nil, 0, false
	}
}

// plainString reads a JSON string without escapes, control characters or invalid UTF-8.
func plainString(b []byte, i int) (string, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return "", 0, false
	}
	start := i + 1
	ascii := true
	for j := start; j < len(b); j++ {
		c := b[j]
		switch {
		case c == '"':
			s := b[start:j]
			if !ascii && !utf8.Valid(s) {
				return "", 0, false
			}
			return string(s), j + 1, true
		case c == '\\' || c < 0x20:
			return "", 0, false
		case c >= 0x80:
			ascii = false
		}
	}
	return "", 0, false
}

// plainUint reads a JSON integer without sign: 0 or [1-9][0-9]*, at most 18 digits.
func plainUint(b []byte, i int) (int64, int, bool) {
	j := i
	var n int64
	for j < len(b) && b[j] >= '0' && b[j] <= '9' && j-i < 18 {
		n = n*10 + int64(b[j]-'0')
		j++
	}
	if j == i || (b[i] == '0' && j-i > 1) {
		return 0, 0, false
	}
	if j < len(b) {
		switch b[j] {
		case '.', 'e', 'E', '-', '+':
			return 0, 0, false
		}
		if b[j] >= '0' && b[j] <= '9' {
			return 0, 0, false // more than 18 digits
		}
	}
	return n, j, true
}

func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipValue returns the end of the JSON value at i, validating it (any string escapes, any
// number form, nesting up to 64 levels).
func skipValue(b []byte, i, depth int) (int, bool) {
	if i >= len(b) || depth > 64 {
		return 0, false
	}
	switch c := b[i]; {
	case c == '"':
		return skipString(b, i)
	case c == '{':
		i = skipWS(b, i+1)
		if i < len(b) && b[i] == '}' {
			return i + 1, true
		}
		for {
			j, ok := skipString(b, i)
			if !ok {
				return 0, false
			}
			i = skipWS(b, j)
			if i >= len(b) || b[i] != ':' {
				return 0, false
			}
			if i, ok = skipValue(b, skipWS(b, i+1), depth+1); !ok {
				return 0, false
			}
			i = skipWS(b, i)
			if i < len(b) && b[i] == ',' {
				i = skipWS(b, i+1)
				continue
			}
			if i < len(b) && b[i] == '}' {
				return i + 1, true
			}
			return 0, false
		}
	case c == '[':
		i = skipWS(b, i+1)
		if i < len(b) && b[i] == ']' {
			return i + 1, true
		}
		for {
			var ok bool
			if i, ok = skipValue(b, i, depth+1); !ok {
				return 0, false
			}
			i = skipWS(b, i)
			if i < len(b) && b[i] == ',' {
				i = skipWS(b, i+1)
				continue
			}
			if i < len(b) && b[i] == ']' {
				return i + 1, true
			}
			return 0, false
		}
	case c == 't':
		return literal(b, i, "true")
	case c == 'f':
		return literal(b, i, "false")
	case c == 'n':
		return literal(b, i, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		return skipNumber(b, i)
	}
	return 0, false
}

func literal(b []byte, i int, lit string) (int, bool) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return 0, false
	}
	return i + len(lit), true
}

func skipString(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return j + 1, true
		case c < 0x20:
			return 0, false
		case c == '\\':
			j++
			if j >= len(b) {
				return 0, false
			}
			switch b[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(b)-j < 5 {
					return 0, false
				}
				for _, h := range b[j+1 : j+5] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return 0, false
					}
				}
				j += 4
			default:
				return 0, false
			}
		}
	}
	return 0, false
}

// skipNumber follows the JSON number grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func skipNumber(b []byte, i int) (int, bool) {
	if b[i] == '-' {
		i++
	}
	if i >= len(b) {
		return 0, false
	}
	switch {
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return 0, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return 0, false
		}
	}
	return i, true
}

// surrogateProblem reports the first \u escape in a JSON text's strings that serde_json (and so
// upstream) refuses: half of a UTF-16 surrogate pair on its own. encoding/json decodes it as
// U+FFFD instead, which would sign or store a character the client never sent. The answer is
// serde_json's text, "lone leading surrogate in hex escape at line L column C" or "unexpected
// end of hex escape at line L column C", with its position (the bytes read when it stopped);
// "" when there is none. b must be valid JSON.
func surrogateProblem(b []byte) string {
	for i := 0; i < len(b); i++ {
		if b[i] != '"' {
			continue
		}
		// A string: find its escapes up to the closing quote.
		for i++; i < len(b) && b[i] != '"'; i++ {
			if b[i] != '\\' {
				continue
			}
			i++
			if i >= len(b) || b[i] != 'u' {
				continue // a one-character escape
			}
			n, ok := hex4(b, i+1)
			if !ok {
				return ""
			}
			end := i + 5 // just after \uXXXX
			switch {
			case n >= 0xDC00 && n <= 0xDFFF:
				return jsonPosMsg("lone leading surrogate in hex escape", b, end)
			case n >= 0xD800 && n <= 0xDBFF:
				if end >= len(b) || b[end] != '\\' {
					return jsonPosMsg("unexpected end of hex escape", b, end+1)
				}
				if end+1 >= len(b) || b[end+1] != 'u' {
					return jsonPosMsg("unexpected end of hex escape", b, end+2)
				}
				n2, ok := hex4(b, end+2)
				if !ok {
					return ""
				}
				if n2 < 0xDC00 || n2 > 0xDFFF {
					return jsonPosMsg("lone leading surrogate in hex escape", b, end+6)
				}
				i = end + 5
			default:
				i = end - 1
			}
		}
	}
	return ""
}

func hex4(b []byte, i int) (uint16, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var n uint16
	for _, c := range b[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		n = n<<4 | uint16(c)
	}
	return n, true
}

// jsonPosMsg formats msg with serde_json's position for the first read bytes of b: the line
// (1-based) and the column, the count of bytes read on that line.
func jsonPosMsg(msg string, b []byte, read int) string {
	read = min(read, len(b))
	line := 1 + bytes.Count(b[:read], []byte{'\n'})
	col := read - (bytes.LastIndexByte(b[:read], '\n') + 1)
	return msg + " at line " + strconv.Itoa(line) + " column " + strconv.Itoa(col)
}
