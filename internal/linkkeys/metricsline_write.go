package linkkeys

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"sort"
	"strconv"
)

// Writing METRICS lines: the field order of the table, numbers as serde_json prints them.

// AppendMetricsLine appends the METRICS line of m to dst, without a newline:
// [MetricsPrefix] and compact JSON with label, elapsed_secs and the fields of
// [MetricsFields] in order (the appended ones unless Absent), then the
// per-prefix counters (source_<name>_<counter>, prefix by prefix in order,
// each prefix's counters in [SourceFields] order; a prefix whose name is not
// valid is left out), then the Extra fields in key order. elapsed_secs is formatted like serde_json formats an
// f64 ([AppendSerdeFloat]); process_rss_bytes is null when nil.
func AppendMetricsLine(dst []byte, m MetricsLine) []byte {
	dst = append(dst, MetricsPrefix...)
	dst = append(dst, `{"label":`...)
	dst = appendJSONString(dst, m.Label)
	dst = append(dst, `,"elapsed_secs":`...)
	dst = AppendSerdeFloat(dst, m.ElapsedSecs)
	for _, f := range metricsFields {
		v, ok := f.Value(&m)
		switch {
		case ok:
			dst = appendUintField(dst, f.Name, v)
		case !f.Appended: // process_rss_bytes, null
			dst = append(dst, `,"`...)
			dst = append(dst, f.Name...)
			dst = append(dst, `":null`...)
		}
	}
	for i := range m.Sources {
		c := &m.Sources[i]
		if !ValidSourcePrefixName(c.Name) {
			continue
		}
		for _, f := range sourceFields {
			dst = append(dst, ',', '"')
			dst = append(dst, sourceFieldPrefix...)
			dst = append(dst, c.Name...)
			dst = append(dst, '_')
			dst = append(dst, f.Name...)
			dst = append(dst, '"', ':')
			dst = strconv.AppendUint(dst, *f.ptr(c), 10)
		}
	}
	if len(m.Extra) > 0 {
		keys := make([]string, 0, len(m.Extra))
		for k := range m.Extra {
			if _, named := metricsFieldIndex[k]; named {
				continue
			}
			if _, _, src := SplitSourceFieldName(k); src {
				continue // the parser never puts one in Extra
			}
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			dst = append(dst, ',')
			dst = appendJSONString(dst, k)
			dst = append(dst, ':')
			if v := m.Extra[k]; math.IsNaN(v) || math.IsInf(v, 0) {
				dst = append(dst, "null"...)
			} else {
				dst = strconv.AppendFloat(dst, v, 'g', -1, 64)
			}
		}
	}
	return append(dst, '}')
}

// FormatMetricsLine returns the METRICS line of m without a newline.
func FormatMetricsLine(m MetricsLine) string { return string(AppendMetricsLine(nil, m)) }

// WriteMetricsLine writes the METRICS line of m with a newline, in one write.
func WriteMetricsLine(w io.Writer, m MetricsLine) error {
	b := AppendMetricsLine(make([]byte, 0, 1024), m)
	_, err := w.Write(append(b, '\n'))
	return err
}

func appendUintField(dst []byte, name string, v uint64) []byte {
	dst = append(dst, ',', '"')
	dst = append(dst, name...)
	dst = append(dst, '"', ':')
	return strconv.AppendUint(dst, v, 10)
}

func appendJSONString(dst []byte, s string) []byte {
	b, _ := json.Marshal(s) // a string always marshals
	return append(dst, b...)
}

// AppendSerdeFloat appends f the way serde_json (ryu) prints an f64: the
// shortest digits that round-trip, laid out as an integer with ".0"
// ("5.0", "120.0"), a plain decimal ("0.25", "0.00012") or scientific
// notation ("1e-7", "1.5e16", "1e21") when the decimal point would sit more
// than 16 digits left or right of the digits. NaN and infinities, which
// serde_json writes as null, are written as null.
func AppendSerdeFloat(dst []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, "null"...)
	}
	if f == 0 {
		if math.Signbit(f) {
			return append(dst, "-0.0"...)
		}
		return append(dst, "0.0"...)
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	// 'e' with -1 precision gives the shortest round-trip digits.
	var buf [32]byte
	e := strconv.AppendFloat(buf[:0], f, 'e', -1, 64)
	mant, expPart, _ := bytes.Cut(e, []byte{'e'})
	exp, _ := strconv.Atoi(string(expPart))
	var digitBuf [17]byte
	digits := digitBuf[:0]
	for _, c := range mant {
		if c != '.' {
			digits = append(digits, c)
		}
	}
	length := len(digits)
	kk := exp + 1 // position of the decimal point relative to the digits
	k := kk - length
	switch {
	case k >= 0 && kk <= 16:
		dst = append(dst, digits...)
		for range k {
			dst = append(dst, '0')
		}
		dst = append(dst, '.', '0')
	case kk > 0 && kk <= 16:
		dst = append(dst, digits[:kk]...)
		dst = append(dst, '.')
		dst = append(dst, digits[kk:]...)
	case kk > -5 && kk <= 0:
		dst = append(dst, '0', '.')
		for range -kk {
			dst = append(dst, '0')
		}
		dst = append(dst, digits...)
	case length == 1:
		dst = append(dst, digits[0], 'e')
		dst = strconv.AppendInt(dst, int64(kk-1), 10)
	default:
		dst = append(dst, digits[0], '.')
		dst = append(dst, digits[1:]...)
		dst = append(dst, 'e')
		dst = strconv.AppendInt(dst, int64(kk-1), 10)
	}
	return dst
}
