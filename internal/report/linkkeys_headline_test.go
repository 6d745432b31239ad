package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/hist"
	lkr "github.com/loadproof/loadproof/internal/linkkeysresult"
)

func TestDurationTextAdaptsItsUnit(t *testing.T) {
	for d, want := range map[time.Duration]string{18 * time.Microsecond: "18.0µs", 3620 * time.Microsecond: "3.62ms",
		17900 * time.Millisecond: "17.9s", 0: "0", 250 * time.Millisecond: "250ms"} {
		if got := DurationText(d); got != want {
			t.Errorf("DurationText(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestHeadlineCountsRefusalsApart: a request-bench whose server refused most requests by design
// headlines the served rate, and lists the refusals with their remedy, not as failures.
func TestHeadlineCountsRefusalsApart(t *testing.T) {
	h := hist.New()
	for range 100 {
		h.Record(2 * time.Millisecond)
	}
	r := &lkr.Result{Requests: &lkr.Requests{Completed: 691, Errors: 48000, Statuses: map[string]int64{"Unavailable": 48000}, Latency: h}}
	r.Command = lkr.CmdRequestBench
	r.Flags = map[string]string{"duration-secs": "2", "op": "domain-keys", "connections": "2"}
	var b bytes.Buffer
	LinkKeysHeadline(&b, r)
	out := b.String()
	for _, want := range []string{"headline: 346 served requests/s, latency p50 2.00ms", "refused by design: 48000 (public_read_limiter=48000)",
		"to admit more (public_read_limiter): each source address gets PUBLIC_READ_BURST"} {
		if !strings.Contains(out, want) {
			t.Errorf("headline lacks %q:\n%s", want, out)
		}
	}
	r.Finish()
	if r.Refused[lkr.RefusedPublicRead] != 48000 {
		t.Errorf("result's refused %v", r.Refused)
	}
}
