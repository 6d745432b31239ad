package hist

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// MsText renders a latency given in milliseconds with a unit that suits it: µs below a
// millisecond, ms below a second, s above (18 µs is "18µs", never "0.0 ms").
func MsText(ms float64) string { return DurationText(time.Duration(ms * float64(time.Millisecond))) }

// DurationText renders a duration with three significant digits in µs, ms or s.
func DurationText(d time.Duration) string {
	switch {
	case d <= 0:
		return "0"
	case d < time.Millisecond:
		return sig3(float64(d)/float64(time.Microsecond)) + "µs"
	case d < time.Second:
		return sig3(float64(d)/float64(time.Millisecond)) + "ms"
	}
	return sig3(d.Seconds()) + "s"
}

func sig3(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// CountText renders a count with thousands separators ("36,447"), as the headlines and the status
// line print counts.
func CountText(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
