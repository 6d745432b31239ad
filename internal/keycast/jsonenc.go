package keycast

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// appendJSONString appends s as a JSON string the way serde_json (and
// therefore rust-nostr and libipld DAG-JSON) writes it: '"' and '\\' escaped,
// \b \t \n \f \r for those control characters, \u00xx (lower-case hex) for the
// other control characters below 0x20, everything else (including '<', '>',
// '&', DEL, U+2028 and U+2029) written raw as UTF-8. Invalid UTF-8 is replaced
// by U+FFFD, as encoding/json does, so an id computed here matches one
// computed after the event went through encoding/json.
func appendJSONString(dst []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\r':
				dst = append(dst, '\\', 'r')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, "\ufffd"...)
			i++
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// canonicalJSON re-encodes a JSON value compactly with object keys sorted by
// their bytes (DAG-JSON / serde_json BTreeMap order) and strings escaped by
// appendJSONString. Numbers are kept as written when they are integers; other
// numbers are re-formatted the shortest way.
func canonicalJSON(dst []byte, raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return dst, fmt.Errorf("keycast: invalid JSON value: %v", err)
	}
	if dec.More() {
		return dst, fmt.Errorf("keycast: invalid JSON value: data after the first value")
	}
	return appendCanonical(dst, v)
}

func appendCanonical(dst []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		return strconv.AppendBool(dst, x), nil
	case string:
		return appendJSONString(dst, x), nil
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return strconv.AppendInt(dst, i, 10), nil
		}
		if u, err := strconv.ParseUint(string(x), 10, 64); err == nil {
			return strconv.AppendUint(dst, u, 10), nil
		}
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return dst, fmt.Errorf("keycast: JSON number %s is out of range", x)
		}
		return strconv.AppendFloat(dst, f, 'g', -1, 64), nil
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendCanonical(dst, e); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, k)
			dst = append(dst, ':')
			var err error
			if dst, err = appendCanonical(dst, x[k]); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	default:
		return dst, fmt.Errorf("keycast: unexpected JSON value of type %T", v)
	}
}
