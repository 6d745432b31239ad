package linkkeys

import (
	"encoding/binary"
	"fmt"
)

// CBOR major types, already shifted into the top three bits.
const (
	majUint   = 0 << 5
	majNint   = 1 << 5
	majBytes  = 2 << 5
	majText   = 3 << 5
	majArray  = 4 << 5
	majMap    = 5 << 5
	majTag    = 6 << 5
	majSimple = 7 << 5
)

// tagEncodedCBOR is the semantic tag for an embedded CBOR data item
// (RFC 8949, section 3.4.5.1) that wraps every envelope payload.
const tagEncodedCBOR = 24

// appendHead appends a CBOR head (major type and argument) in its shortest
// form, as deterministic encoding requires.
func appendHead(dst []byte, major byte, n uint64) []byte {
	switch {
	case n < 24:
		return append(dst, major|byte(n))
	case n <= 0xff:
		return append(dst, major|24, byte(n))
	case n <= 0xffff:
		return append(dst, major|25, byte(n>>8), byte(n))
	case n <= 0xffffffff:
		return append(dst, major|26, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	default:
		dst = append(dst, major|27)
		return binary.BigEndian.AppendUint64(dst, n)
	}
}

func appendText(dst []byte, s string) []byte {
	dst = appendHead(dst, majText, uint64(len(s)))
	return append(dst, s...)
}

// decoder walks one CBOR item sequence without allocating. It accepts only
// definite-length items; the server's depth pre-scan rejects indefinite ones
// anyway, and the envelope grammar never needs them.
type decoder struct {
	b   []byte
	off int
}

// head reads one head and returns the major type (shifted) and argument.
func (d *decoder) head() (major byte, arg uint64, err error) {
	if d.off >= len(d.b) {
		return 0, 0, errTruncated(d.off, "item")
	}
	ib := d.b[d.off]
	major, ai := ib&0xe0, ib&0x1f
	p := d.off + 1
	switch {
	case ai < 24:
		arg = uint64(ai)
	case ai == 24:
		if p+1 > len(d.b) {
			return 0, 0, errTruncated(d.off, "head")
		}
		arg = uint64(d.b[p])
		p++
	case ai == 25:
		if p+2 > len(d.b) {
			return 0, 0, errTruncated(d.off, "head")
		}
		arg = uint64(binary.BigEndian.Uint16(d.b[p:]))
		p += 2
	case ai == 26:
		if p+4 > len(d.b) {
			return 0, 0, errTruncated(d.off, "head")
		}
		arg = uint64(binary.BigEndian.Uint32(d.b[p:]))
		p += 4
	case ai == 27:
		if p+8 > len(d.b) {
			return 0, 0, errTruncated(d.off, "head")
		}
		arg = binary.BigEndian.Uint64(d.b[p:])
		p += 8
	case ai == 31:
		return 0, 0, fmt.Errorf("indefinite-length item or break at offset %d", d.off)
	default:
		return 0, 0, fmt.Errorf("reserved additional information %d at offset %d", ai, d.off)
	}
	d.off = p
	return major, arg, nil
}

func errTruncated(off int, what string) error {
	return fmt.Errorf("input truncated inside %s at offset %d", what, off)
}

// take returns the next n bytes (aliasing the input) for a string body.
func (d *decoder) take(n uint64) ([]byte, error) {
	if n > uint64(len(d.b)-d.off) {
		return nil, fmt.Errorf("string of %d bytes at offset %d runs past the end of the input (%d bytes left)", n, d.off, len(d.b)-d.off)
	}
	s := d.b[d.off : d.off+int(n)]
	d.off += int(n)
	return s, nil
}

// skip skips one complete data item, iteratively, so that nesting depth
// cannot grow the Go stack.
func (d *decoder) skip() error {
	pending := uint64(1)
	for pending > 0 {
		pending--
		major, arg, err := d.head()
		if err != nil {
			return err
		}
		left := uint64(len(d.b) - d.off)
		switch major {
		case majBytes, majText:
			if _, err := d.take(arg); err != nil {
				return err
			}
		case majArray:
			if arg > left {
				return fmt.Errorf("array of %d items cannot fit in the %d bytes left", arg, left)
			}
			pending += arg
		case majMap:
			if arg > left/2 {
				return fmt.Errorf("map of %d pairs cannot fit in the %d bytes left", arg, left)
			}
			pending += 2 * arg
		case majTag:
			pending++
		}
		if pending > uint64(len(d.b)-d.off) {
			return fmt.Errorf("%d pending items cannot fit in the %d bytes left", pending, len(d.b)-d.off)
		}
	}
	return nil
}
