package linkkeys

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// MaxDepth is the deepest nesting of CBOR arrays and maps the server accepts
// in an envelope or payload.
const MaxDepth = 64

// Errors returned (wrapped, with detail) by [CheckDepth].
var (
	ErrExcessiveDepth = errors.New("linkkeys: excessive CBOR nesting depth")
	ErrMalformedCBOR  = errors.New("linkkeys: malformed CBOR")
)

// CheckDepth is the pre-dispatch scan of the raw frame and of the inner
// payload: one linear pass over a sequence of CBOR items, without building
// values, that fails with ErrExcessiveDepth when arrays and maps nest deeper
// than max (max <= 0 means [MaxDepth]) and with ErrMalformedCBOR on
// indefinite lengths, reserved additional information 28..30, a bare break,
// truncated heads, string lengths past the end of the input, array or map
// counts that cannot fit in the remaining bytes, containers left incomplete
// and a tag without content. Empty input passes. It keeps one counter per open
// container in a fixed array (no recursion) and does not allocate when max is
// at most MaxDepth and the input is accepted.
func CheckDepth(b []byte, max int) error {
	if max <= 0 {
		max = MaxDepth
	}
	var fixed [MaxDepth]uint64
	stack := fixed[:0]
	if max > MaxDepth {
		stack = make([]uint64, 0, min(max, len(b)))
	}
	inTag := false
	off := 0
	for off < len(b) {
		start := off
		ib := b[off]
		major, ai := ib>>5, ib&0x1f
		off++
		var arg uint64
		switch {
		case ai < 24:
			arg = uint64(ai)
		case ai <= 27:
			w := 1 << (ai - 24)
			if len(b)-off < w {
				return fmt.Errorf("%w: head at offset %d is truncated (%d argument bytes, %d left)", ErrMalformedCBOR, start, w, len(b)-off)
			}
			switch w {
			case 1:
				arg = uint64(b[off])
			case 2:
				arg = uint64(binary.BigEndian.Uint16(b[off:]))
			case 4:
				arg = uint64(binary.BigEndian.Uint32(b[off:]))
			default:
				arg = binary.BigEndian.Uint64(b[off:])
			}
			off += w
		case ai == 31:
			if major == 7 {
				return fmt.Errorf("%w: break byte 0xff at offset %d outside an indefinite-length item", ErrMalformedCBOR, start)
			}
			return fmt.Errorf("%w: indefinite-length item (0x%02x) at offset %d; only definite lengths are accepted", ErrMalformedCBOR, ib, start)
		default:
			return fmt.Errorf("%w: reserved additional information %d at offset %d", ErrMalformedCBOR, ai, start)
		}
		if major == 6 {
			// The tag's content is the item that fills the enclosing slot.
			inTag = true
			continue
		}
		inTag = false
		if n := len(stack); n > 0 {
			stack[n-1]--
		}
		left := uint64(len(b) - off)
		switch major {
		case 2, 3:
			if arg > left {
				return fmt.Errorf("%w: string of %d bytes at offset %d runs past the end of the input (%d bytes left)", ErrMalformedCBOR, arg, start, left)
			}
			off += int(arg)
		case 4, 5:
			if len(stack)+1 > max {
				return fmt.Errorf("%w: arrays and maps nest deeper than %d at offset %d", ErrExcessiveDepth, max, start)
			}
			count := arg
			if major == 5 {
				if arg > left/2 {
					return fmt.Errorf("%w: map of %d pairs at offset %d cannot fit in the %d bytes left", ErrMalformedCBOR, arg, start, left)
				}
				count = 2 * arg
			} else if arg > left {
				return fmt.Errorf("%w: array of %d items at offset %d cannot fit in the %d bytes left", ErrMalformedCBOR, arg, start, left)
			}
			if count > 0 {
				stack = append(stack, count)
				continue
			}
		}
		for len(stack) > 0 && stack[len(stack)-1] == 0 {
			stack = stack[:len(stack)-1]
		}
	}
	if inTag {
		return fmt.Errorf("%w: tag at the end of the input has no content", ErrMalformedCBOR)
	}
	if n := len(stack); n > 0 {
		return fmt.Errorf("%w: input ends with %d items missing from the array or map at depth %d", ErrMalformedCBOR, stack[n-1], n)
	}
	return nil
}
