package httpwire

import (
	"encoding/json"
	"unicode/utf8"
)

// JSON scanning. The scanners read RFC 8259 JSON in place, without building values: callers
// decode their own few shapes with them (the server's /api/nostr call and event, the client's
// judgement of a response body) and hand everything the scanners refuse to encoding/json, which
// stays the authority. Each function takes the text b and an index i and returns the index just
// after what it read; ok=false means "not this, or not plain enough", never a guess.

// MaxDepth bounds the nesting SkipValue follows. encoding/json allows 10,000 levels; a value
// nested deeper than this is refused here and left to it.
const MaxDepth = 64

// SkipWS returns the index of the first byte at or after i that is not JSON white space.
func SkipWS(b []byte, i int) int {
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

// SkipString reads the string whose opening quote is b[i]: it returns the index after the
// closing quote and whether the content has escapes. Escapes are checked for form, control
// bytes refused; bytes that are not UTF-8 are left alone, as encoding/json accepts them.
func SkipString(b []byte, i int) (end int, esc, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return 0, false, false
	}
	for j := plainStringRun(b, i+1); j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return j + 1, esc, true
		case c < 0x20:
			return 0, false, false
		case c == '\\':
			esc = true
			j++
			if j >= len(b) {
				return 0, false, false
			}
			switch b[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(b)-j < 5 {
					return 0, false, false
				}
				for _, h := range b[j+1 : j+5] {
					if _, ok := HexDigit(h); !ok {
						return 0, false, false
					}
				}
				j += 4
			default:
				return 0, false, false
			}
			j = plainStringRun(b, j+1) - 1
		}
	}
	return 0, false, false
}

// SkipValue returns the index after the JSON value at b[i], checking it against the grammar
// (strings as SkipString does, numbers in full, nesting up to MaxDepth).
func SkipValue(b []byte, i int) (int, bool) { return skipValue(b, i, 0) }

func skipValue(b []byte, i, depth int) (int, bool) {
	if i >= len(b) || depth >= MaxDepth {
		return 0, false
	}
	switch c := b[i]; {
	case c == '"':
		end, _, ok := SkipString(b, i)
		return end, ok
	case c == '{':
		o := Object{b: b, i: i + 1}
		for {
			_, _, more, ok := o.Next()
			if !ok {
				return 0, false
			}
			if !more {
				return o.i, true
			}
			if o.i, ok = skipValue(b, o.i, depth+1); !ok {
				return 0, false
			}
		}
	case c == '[':
		a := Array{b: b, i: i + 1}
		for {
			more, ok := a.Next()
			if !ok {
				return 0, false
			}
			if !more {
				return a.i, true
			}
			if a.i, ok = skipValue(b, a.i, depth+1); !ok {
				return 0, false
			}
		}
	case c == 't':
		return literal(b, i, "true")
	case c == 'f':
		return literal(b, i, "false")
	case c == 'n':
		return literal(b, i, "null")
	case c == '-' || ('0' <= c && c <= '9'):
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

// skipNumber follows the number grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func skipNumber(b []byte, i int) (int, bool) {
	if b[i] == '-' {
		i++
	}
	digits := func() int {
		j := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		return i - j
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case digits() == 0:
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return 0, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return 0, false
		}
	}
	return i, true
}

// PlainString reads a string without escapes or control bytes whose content is UTF-8, and
// returns the content (aliasing b). Any other string is ok=false, for the caller's general
// decoder: such a string means the same to it, but its bytes are not its value.
func PlainString(b []byte, i int) (s []byte, end int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, 0, false
	}
	start := i + 1
	ascii := true
	for j := start; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			s := b[start:j]
			if !ascii && !utf8.Valid(s) {
				return nil, 0, false
			}
			return s, j + 1, true
		case c == '\\' || c < 0x20:
			return nil, 0, false
		case c >= 0x80:
			ascii = false
		}
	}
	return nil, 0, false
}

// String reads the string at b[i] and returns its value: a plain string's bytes, any other
// string as encoding/json decodes it (escapes undone, bytes that are not UTF-8 replaced).
func String(b []byte, i int) (string, int, bool) {
	if s, end, ok := PlainString(b, i); ok {
		return string(s), end, true
	}
	end, _, ok := SkipString(b, i)
	if !ok {
		return "", 0, false
	}
	var s string
	if json.Unmarshal(b[i:end], &s) != nil {
		return "", 0, false
	}
	return s, end, true
}

// PlainUint reads an integer without sign, fraction or exponent: 0 or [1-9][0-9]*, at most 18
// digits.
func PlainUint(b []byte, i int) (int64, int, bool) {
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
		switch c := b[j]; {
		case c == '.' || c == 'e' || c == 'E' || c == '-' || c == '+':
			return 0, 0, false
		case '0' <= c && c <= '9':
			return 0, 0, false // more than 18 digits
		}
	}
	return n, j, true
}

// Object reads the members of a JSON object in order:
//
//	o, ok := httpwire.OpenObject(b, 0)
//	for ok {
//		key, esc, more, ok2 := o.Next()   // positions o at the member's value
//		if !ok2 || !more { … }
//		… read the value at o.Pos(), then o.Seek(end), or o.Skip()
//	}
//
// After the closing brace, Pos is just past it.
type Object struct {
	b []byte
	i int
	n int // members begun
}

// OpenObject starts an Object at the '{' at b[i] (white space before it skipped).
func OpenObject(b []byte, i int) (Object, bool) {
	i = SkipWS(b, i)
	if i >= len(b) || b[i] != '{' {
		return Object{}, false
	}
	return Object{b: b, i: i + 1}, true
}

// Next reads up to the next member's value: the comma before it (from the second member on), its
// key and the colon. key is the key's raw content between the quotes, esc says it has escapes
// (its bytes are then not its value). At the closing brace more is false. ok=false is a syntax
// error.
func (o *Object) Next() (key []byte, esc, more, ok bool) {
	b := o.b
	i := SkipWS(b, o.i)
	if i < len(b) && b[i] == '}' {
		o.i = i + 1
		return nil, false, false, true
	}
	if o.n > 0 {
		if i >= len(b) || b[i] != ',' {
			return nil, false, false, false
		}
		i = SkipWS(b, i+1)
	}
	end, esc, ok := SkipString(b, i)
	if !ok {
		return nil, false, false, false
	}
	key = b[i+1 : end-1]
	i = SkipWS(b, end)
	if i >= len(b) || b[i] != ':' {
		return nil, false, false, false
	}
	o.i = SkipWS(b, i+1)
	o.n++
	return key, esc, true, true
}

// Pos is the index the reader stands at: a member's value after Next, past the object at its end.
func (o *Object) Pos() int { return o.i }

// Seek moves the reader past a value the caller read, end being the index after it.
func (o *Object) Seek(end int) { o.i = end }

// Skip moves the reader past the value at Pos, checking it as SkipValue does.
func (o *Object) Skip() bool {
	var ok bool
	if o.i < len(o.b) && o.b[o.i] == '"' { // the usual member value, without the dispatch
		o.i, _, ok = SkipString(o.b, o.i)
	} else {
		o.i, ok = skipValue(o.b, o.i, 0)
	}
	return ok
}

// Array reads the elements of a JSON array in order, as Object reads members.
type Array struct {
	b []byte
	i int
	n int
}

// OpenArray starts an Array at the '[' at b[i] (white space before it skipped).
func OpenArray(b []byte, i int) (Array, bool) {
	i = SkipWS(b, i)
	if i >= len(b) || b[i] != '[' {
		return Array{}, false
	}
	return Array{b: b, i: i + 1}, true
}

// Next reads up to the next element (the comma before it from the second on); at the closing
// bracket more is false. ok=false is a syntax error.
func (a *Array) Next() (more, ok bool) {
	b := a.b
	i := SkipWS(b, a.i)
	if i < len(b) && b[i] == ']' {
		a.i = i + 1
		return false, true
	}
	if a.n > 0 {
		if i >= len(b) || b[i] != ',' {
			return false, false
		}
		i = SkipWS(b, i+1)
	}
	if i >= len(b) {
		return false, false
	}
	a.i = i
	a.n++
	return true, true
}

// Pos is the index of the element after Next, or past the array at its end.
func (a *Array) Pos() int { return a.i }

// Seek moves the reader past an element the caller read.
func (a *Array) Seek(end int) { a.i = end }

// Skip moves the reader past the element at Pos, checking it as SkipValue does.
func (a *Array) Skip() bool {
	end, ok := SkipValue(a.b, a.i)
	a.i = end
	return ok
}
