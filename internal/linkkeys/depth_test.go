package linkkeys

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

func nested(open byte, n int, inner []byte) []byte {
	b := bytes.Repeat([]byte{open}, n)
	return append(b, inner...)
}

// Upstream's depth tests, plus the other rejections of the pre-scan
// (docs/protocol-linkkeys.md, Checks before dispatch).
func TestCheckDepth(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		max  int
		want error // nil, ErrExcessiveDepth or ErrMalformedCBOR
	}{
		{"simple cbor passes", hexb(t, goldenHelloRequest), MaxDepth, nil},
		{"golden response passes", hexb(t, goldenDomainKeysOK), MaxDepth, nil},
		{"empty input passes", nil, MaxDepth, nil},
		{"10 levels pass", nested(0x81, 9, []byte{0x80}), MaxDepth, nil},
		{"64 nested arrays pass", nested(0x81, 63, []byte{0x80}), MaxDepth, nil},
		{"65 nested arrays rejected", nested(0x81, 64, []byte{0x80}), MaxDepth, ErrExcessiveDepth},
		{"100 nested arrays rejected", nested(0x81, 99, []byte{0x80}), MaxDepth, ErrExcessiveDepth},
		{"100 nested maps rejected", bytes.Repeat([]byte{0xa1, 0x00}, 100), MaxDepth, ErrExcessiveDepth},
		{"max 0 means MaxDepth", nested(0x81, 63, []byte{0x80}), 0, nil},
		{"smaller max", nested(0x81, 3, []byte{0x80}), 3, ErrExcessiveDepth},
		{"larger max", nested(0x81, 99, []byte{0x80}), 100, nil},
		{"83 01 02 rejected", []byte{0x83, 0x01, 0x02}, MaxDepth, ErrMalformedCBOR},
		{"83 01 02 03 passes", []byte{0x83, 0x01, 0x02, 0x03}, MaxDepth, nil},
		{"array of 2^40 entries", []byte{0x9b, 0, 0, 0x01, 0, 0, 0, 0, 0, 0x01}, MaxDepth, ErrMalformedCBOR},
		{"map of 2^40 entries", []byte{0xbb, 0, 0, 0x01, 0, 0, 0, 0, 0, 0x01}, MaxDepth, ErrMalformedCBOR},
		{"map of 2^63 entries", []byte{0xbb, 0x80, 0, 0, 0, 0, 0, 0, 0, 0x01, 0x01}, MaxDepth, ErrMalformedCBOR},
		{"byte string near u64 max", []byte{0x5b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe, 0x00}, MaxDepth, ErrMalformedCBOR},
		{"text string near u64 max", []byte{0x7b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x61}, MaxDepth, ErrMalformedCBOR},
		{"string one past end", []byte{0x62, 0x61}, MaxDepth, ErrMalformedCBOR},
		{"indefinite array", []byte{0x9f, 0x01, 0xff}, MaxDepth, ErrMalformedCBOR},
		{"indefinite map", []byte{0xbf, 0xff}, MaxDepth, ErrMalformedCBOR},
		{"indefinite bytes", []byte{0x5f, 0x41, 0x00, 0xff}, MaxDepth, ErrMalformedCBOR},
		{"indefinite text", []byte{0x7f, 0xff}, MaxDepth, ErrMalformedCBOR},
		{"bare break", []byte{0xff}, MaxDepth, ErrMalformedCBOR},
		{"reserved 28", []byte{0x1c}, MaxDepth, ErrMalformedCBOR},
		{"reserved 30", []byte{0xbe}, MaxDepth, ErrMalformedCBOR},
		{"truncated 8-byte head", []byte{0x1b, 0, 0}, MaxDepth, ErrMalformedCBOR},
		{"truncated 1-byte head", []byte{0x18}, MaxDepth, ErrMalformedCBOR},
		{"tag without content", []byte{0xd8, 0x18}, MaxDepth, ErrMalformedCBOR},
		{"tag in array fills one slot", []byte{0x82, 0xd8, 0x18, 0x41, 0xa0, 0x01}, MaxDepth, nil},
		{"nested tags add no depth", append(bytes.Repeat([]byte{0xc1}, 1000), 0x00), MaxDepth, nil},
		{"float64", []byte{0xfb, 0x3f, 0xf0, 0, 0, 0, 0, 0, 0}, MaxDepth, nil},
		{"sequence of items", []byte{0x01, 0x80, 0xa0}, MaxDepth, nil},
		{"empty containers count as depth", nested(0x81, 64, []byte{0xa0}), MaxDepth, ErrExcessiveDepth},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckDepth(tt.in, tt.max)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("CheckDepth(%x) = %v, want nil", tt.in, err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("CheckDepth(%x) = %v, want %v", tt.in, err, tt.want)
			}
			if ref := refCheckDepth(tt.in, tt.max); ref == nil {
				t.Fatalf("reference scan accepts %x but CheckDepth rejects it", tt.in)
			}
		})
	}
}

// A megabyte of nesting must be rejected without growing the stack.
func TestCheckDepthHugeNesting(t *testing.T) {
	b := nested(0x81, MaxFrameSize-1, []byte{0x80})
	if err := CheckDepth(b, MaxDepth); !errors.Is(err, ErrExcessiveDepth) {
		t.Fatalf("got %v", err)
	}
	if err := CheckDepth(b, 1<<30); err != nil {
		t.Fatalf("with a huge max: %v", err)
	}
}

// refCheckDepth is a deliberately simple recursive version of the same rules,
// used to cross-check CheckDepth on small inputs.
func refCheckDepth(b []byte, max int) error {
	if max <= 0 {
		max = MaxDepth
	}
	d := decoder{b: b}
	var item func(depth int) error
	item = func(depth int) error {
		major, arg, err := d.head()
		if err != nil {
			return err
		}
		switch major {
		case majBytes, majText:
			_, err := d.take(arg)
			return err
		case majTag:
			return item(depth)
		case majArray, majMap:
			if depth+1 > max {
				return ErrExcessiveDepth
			}
			n := arg
			if major == majMap {
				if n > uint64(len(b)) {
					return ErrMalformedCBOR
				}
				n *= 2
			}
			if n > uint64(len(b)) {
				return ErrMalformedCBOR
			}
			for ; n > 0; n-- {
				if err := item(depth + 1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for d.off < len(b) {
		if err := item(0); err != nil {
			return fmt.Errorf("%w", err)
		}
	}
	return nil
}
