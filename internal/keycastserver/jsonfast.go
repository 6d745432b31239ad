package keycastserver

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/loadproof/loadproof/internal/httpwire"
	"github.com/loadproof/loadproof/internal/keycast"
)

// Single-pass decoding of the common /api/nostr bodies. encoding/json validates the body, then
// decodes it, then decodes the event again: about a tenth of a sign_event's CPU (the A/B is in
// docs/benchmarks.md, "Hand-written JSON scanning against encoding/json"). The decoders here,
// built on httpwire's scanners, accept only plain shapes (lower-case keys, each once, strings
// without escapes, integers without sign, fraction or exponent) and report ok=false for anything
// else, which then goes through encoding/json and keycast.ParseUnsignedEvent as before.
// FuzzFastRPC and FuzzEventFast check that whatever they accept, the general decoders accept
// with the same result.

// fastRPC decodes {"method":"…","params":[…]} in one validating pass.
func fastRPC(b []byte) (rpcCall, bool) {
	var c rpcCall
	o, ok := httpwire.OpenObject(b, 0)
	if !ok {
		return c, false
	}
	var haveMethod, haveParams bool
	for {
		key, esc, more, ok := o.Next()
		if !ok || esc {
			return c, false
		}
		if !more {
			break
		}
		switch string(key) {
		case "method":
			m, end, ok := httpwire.PlainString(b, o.Pos())
			if !ok || haveMethod {
				return c, false
			}
			// A known method's name is the label's string; only others are copied.
			if i := methodIndex(unsafeString(m)); i != mUnknown {
				c.method = rpcMethodLabels[i]
			} else {
				c.method = string(m)
			}
			haveMethod = true
			o.Seek(end)
		case "params":
			// null and absent params are the general decoder's business.
			a, ok := httpwire.OpenArray(b, o.Pos())
			if !ok || haveParams {
				return c, false
			}
			for {
				more, ok := a.Next()
				if !ok {
					return c, false
				}
				if !more {
					break
				}
				start := a.Pos()
				if !a.Skip() {
					return c, false
				}
				c.params = append(c.params, json.RawMessage(b[start:a.Pos():a.Pos()]))
			}
			haveParams = true
			o.Seek(a.Pos())
		default:
			return c, false
		}
	}
	if httpwire.SkipWS(b, o.Pos()) != len(b) || !haveMethod {
		return c, false
	}
	c.idx = methodIndex(c.method)
	return c, true
}

// fastEventObject decodes an event object whose pubkey is signerHex.
func fastEventObject(b json.RawMessage, signerHex string) (keycast.UnsignedEvent, bool) {
	var ev keycast.UnsignedEvent
	o, ok := httpwire.OpenObject(b, 0)
	if !ok {
		return ev, false
	}
	var seen [6]bool // id, pubkey, created_at, kind, tags, content
	for {
		key, esc, more, ok := o.Next()
		if !ok || esc {
			return ev, false
		}
		if !more {
			break
		}
		i := o.Pos()
		var slot, end int
		switch string(key) {
		case "id":
			slot = 0
			raw, j, ok := httpwire.PlainString(b, i)
			if !ok || len(raw) != 64 {
				return ev, false
			}
			id := string(raw)
			if !isLowerHex(id) {
				return ev, false
			}
			ev.ID, end = &id, j
		case "pubkey":
			slot = 1
			pk, j, ok := httpwire.PlainString(b, i)
			if !ok || string(pk) != signerHex {
				return ev, false
			}
			ev.PubKey, end = signerHex, j
		case "created_at":
			slot = 2
			n, j, ok := httpwire.PlainUint(b, i)
			if !ok {
				return ev, false
			}
			ev.CreatedAt, end = n, j
		case "kind":
			slot = 3
			n, j, ok := httpwire.PlainUint(b, i)
			if !ok || n > keycast.MaxKind {
				return ev, false
			}
			ev.Kind, end = int(n), j
		case "tags":
			slot = 4
			tags, j, ok := plainTags(b, i)
			if !ok {
				return ev, false
			}
			ev.Tags, end = tags, j
		case "content":
			slot = 5
			s, j, ok := httpwire.PlainString(b, i)
			if !ok {
				return ev, false
			}
			ev.Content, end = string(s), j
		default:
			return ev, false
		}
		if seen[slot] {
			return ev, false
		}
		seen[slot] = true
		o.Seek(end)
	}
	if httpwire.SkipWS(b, o.Pos()) != len(b) || !seen[1] || !seen[2] || !seen[3] || !seen[4] || !seen[5] {
		return ev, false
	}
	return ev, true
}

// plainTags reads [] or [["a","b"],…] with plain strings.
func plainTags(b []byte, i int) ([][]string, int, bool) {
	outer, ok := httpwire.OpenArray(b, i)
	if !ok {
		return nil, 0, false
	}
	tags := [][]string{}
	for {
		more, ok := outer.Next()
		if !ok {
			return nil, 0, false
		}
		if !more {
			return tags, outer.Pos(), true
		}
		inner, ok := httpwire.OpenArray(b, outer.Pos())
		if !ok {
			return nil, 0, false
		}
		tag := []string{}
		for {
			more, ok := inner.Next()
			if !ok {
				return nil, 0, false
			}
			if !more {
				break
			}
			s, end, ok := httpwire.PlainString(b, inner.Pos())
			if !ok {
				return nil, 0, false
			}
			tag = append(tag, string(s))
			inner.Seek(end)
		}
		tags = append(tags, tag)
		outer.Seek(inner.Pos())
	}
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
		d, ok := httpwire.HexDigit(c)
		if !ok {
			return 0, false
		}
		n = n<<4 | uint16(d)
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
