package hist

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
)

// MaxCounts bounds the counts array of a histogram read from a file: the 21,504 counts of the
// layout loadproof records with (1 µs..10 min at 3 significant figures), so a file costs no more per
// histogram than one loadproof wrote; other layouts within it (fewer figures, a narrower or coarser
// range) are still read and re-recorded. hdrhistogram-go allocates the counts array from the
// geometry a blob declares, so a 52-character blob declaring 1..2^62 at 5 figures cost 49 MB;
// Geometry.Check refuses it from the header, before the library sees it.
const MaxCounts = 21504

// Geometry is what a compressed HDR blob declares in its header.
type Geometry struct {
	Lowest, Highest int64
	SigFigs         int32
	PayloadLength   int32
}

// v2 cookies of the HdrHistogram encoding (the low nibble's 0x10 is a word-size flag, masked off).
const (
	v2Cookie           = 0x1c849303
	v2CompressedCookie = 0x1c849304
	headerSize         = 40
)

// ReadGeometry parses the header of a base64 V2-compressed HDR blob, inflating only its 40-byte
// header, so a blob can be judged before anything is allocated for it.
func ReadGeometry(encoded []byte) (Geometry, error) {
	// Only the first 8+compressed bytes are needed; base64 of a header is short, but the payload is
	// not: decode all (the caller bounds the blob's length) and inflate 40 bytes only.
	raw := make([]byte, base64.StdEncoding.DecodedLen(len(encoded)))
	n, err := base64.StdEncoding.Decode(raw, encoded)
	if err != nil {
		return Geometry{}, fmt.Errorf("not base64: %v", err)
	}
	raw = raw[:n]
	if len(raw) < 8 {
		return Geometry{}, fmt.Errorf("blob of %d bytes is shorter than the 8-byte HDR header", len(raw))
	}
	if c := int32(binary.BigEndian.Uint32(raw[0:4])) &^ 0xf0; c != v2CompressedCookie {
		return Geometry{}, fmt.Errorf("cookie %#x is not the V2 compressed HDR encoding", c)
	}
	clen := int32(binary.BigEndian.Uint32(raw[4:8]))
	if clen < 0 || int(clen) > len(raw)-8 {
		return Geometry{}, fmt.Errorf("compressed length %d does not fit the %d bytes given", clen, len(raw)-8)
	}
	z, err := zlib.NewReader(bytes.NewReader(raw[8 : 8+clen]))
	if err != nil {
		return Geometry{}, fmt.Errorf("compressed contents: %v", err)
	}
	defer z.Close()
	var h [headerSize]byte
	if _, err := io.ReadFull(z, h[:]); err != nil {
		return Geometry{}, fmt.Errorf("decompressed header truncated: %v", err)
	}
	if c := int32(binary.BigEndian.Uint32(h[0:4])) &^ 0xf0; c != v2Cookie {
		return Geometry{}, fmt.Errorf("inner cookie %#x is not the V2 HDR encoding", c)
	}
	return Geometry{
		PayloadLength: int32(binary.BigEndian.Uint32(h[4:8])),
		SigFigs:       int32(binary.BigEndian.Uint32(h[12:16])),
		Lowest:        int64(binary.BigEndian.Uint64(h[16:24])),
		Highest:       int64(binary.BigEndian.Uint64(h[24:32])),
	}, nil
}

// Check refuses a geometry outside what hdrhistogram-go accepts (lowest >= 1, highest >= 2*lowest,
// 1..5 significant figures), one whose counts array would exceed MaxCounts, or a payload longer than
// such an array can need (9 bytes a count). The error says which.
func (g Geometry) Check() error {
	switch {
	case g.SigFigs < 1 || g.SigFigs > 5:
		return fmt.Errorf("%d significant figures (1..5 allowed)", g.SigFigs)
	case g.Lowest < 1:
		return fmt.Errorf("lowest trackable value %d (at least 1)", g.Lowest)
	case g.Highest < 2 || g.Highest/2 < g.Lowest || g.Highest > math.MaxInt64/2:
		return fmt.Errorf("highest trackable value %d for lowest %d (want 2*lowest..2^62-1)", g.Highest, g.Lowest)
	case g.PayloadLength < 0:
		return fmt.Errorf("negative payload length %d", g.PayloadLength)
	}
	n := g.countsLen()
	if n > MaxCounts {
		return fmt.Errorf("geometry %d..%d at %d figures needs %d counts, above the %d this reader allows", g.Lowest, g.Highest, g.SigFigs, n, MaxCounts)
	}
	if int64(g.PayloadLength) > n*9 {
		return fmt.Errorf("payload length %d above the %d bytes %d counts can need", g.PayloadLength, n*9, n)
	}
	return nil
}

// countsLen is the length of the counts array hdrhistogram-go allocates for g (the same
// arithmetic as its New; TestCountsLenMatchesLibrary holds the two together).
func (g Geometry) countsLen() int64 {
	largest := 2 * math.Pow10(int(g.SigFigs))
	subBucketCountMagnitude := int64(math.Ceil(math.Log2(largest)))
	subBucketHalfCountMagnitude := max(subBucketCountMagnitude, 1) - 1
	unitMagnitude := int64(bits.Len64(uint64(g.Lowest))) - 1
	subBucketCount := int64(1) << (subBucketHalfCountMagnitude + 1)
	smallestUntrackable := subBucketCount << unitMagnitude
	buckets := int64(1)
	for smallestUntrackable <= g.Highest {
		if smallestUntrackable > math.MaxInt64/2 {
			buckets++
			break
		}
		smallestUntrackable <<= 1
		buckets++
	}
	return (buckets + 1) * (subBucketCount / 2)
}

var errGeometry = errors.New("histogram geometry refused")
