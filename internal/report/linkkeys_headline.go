package report

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/loadproof/loadproof/internal/hist"
	lkr "github.com/loadproof/loadproof/internal/linkkeysresult"
)

// LinkKeysHeadline prints, after upstream's lines, what the command exists to prove (held
// connections for connections, completed handshakes per second for handshake-bench, served
// requests per second for request-bench, admitted and shed for ddos) and what the server refused by
// design, by reason, with the remedy for each. Refusals are the server's admission control doing
// its job: never failures, never throughput.
func LinkKeysHeadline(w io.Writer, r *lkr.Result) {
	w = TextWriter(w)
	p := lkr.ParamsFromFlags(r.Flags)
	secs := float64(p.DurationSecs)
	refused := r.Refusals()
	var total int64
	for _, v := range refused {
		total += v
	}
	switch r.Command {
	case lkr.CmdConnections:
		h := r.Hold
		if h == nil {
			break
		}
		line := fmt.Sprintf("headline: held %d of %d requested for %ds (ramp %s)", h.Held, p.Count, h.HoldSecs, DurationText(time.Duration(h.RampTime)))
		if h.BytesPerConn > 0 {
			line += fmt.Sprintf("; client %.1f KiB per held connection", h.BytesPerConn/1024)
		}
		if per, ok := serverBytesPerHeld(r); ok {
			line += fmt.Sprintf("; server %.1f KiB per held connection", per/1024)
		}
		if s := r.Server; s != nil && len(s.Checks) > 0 {
			marks := make([]string, len(s.Checks))
			for i, c := range s.Checks {
				mark := "✓"
				if !c.OK {
					mark = "✗"
				}
				marks[i] = c.Name + " " + mark
			}
			line += "; checks " + strings.Join(marks, ", ")
		}
		fmt.Fprintln(w, line)
	case lkr.CmdHandshakeBench:
		hs := r.Handshakes
		if hs == nil || secs <= 0 {
			break
		}
		line := fmt.Sprintf("headline: %s completed handshakes/s", rateText(float64(hs.Completed)/secs))
		if p.Resume {
			line += fmt.Sprintf(" (full %s/s, resumed %s/s)", rateText(float64(hs.Full)/secs), rateText(float64(hs.Resumed)/secs))
		}
		if r.Attempts != nil {
			line += latencyText(r.Attempts.Latency)
		}
		if total > 0 {
			// The limiter's refusals end as failed handshakes; what failed besides them is
			// what needs looking at.
			line += fmt.Sprintf("; %d failures besides the refusals", max(hs.Failed-total, 0))
		}
		fmt.Fprintln(w, line)
	case lkr.CmdRequestBench:
		q := r.Requests
		if q == nil || secs <= 0 {
			break
		}
		fmt.Fprintf(w, "headline: %s served requests/s%s\n", rateText(float64(q.Completed)/secs), latencyText(q.Latency))
	case lkr.CmdDDoS:
		if a := r.Attempts; a != nil {
			fmt.Fprintf(w, "headline: %d of %d sources admitted\n", a.Succeeded, p.Sources)
		}
	}
	if len(refused) == 0 {
		if n := closedDuringHandshake(r); n > 0 && r.Server == nil {
			fmt.Fprintf(w, "  %d handshakes ended with the stream closed (EOF/ECONNRESET): that is how the server's handshake limiter refuses; with --server-metrics (or a metrics_addr in the info file) they are told apart from failures, and %s\n",
				n, lkr.Remedies[lkr.RefusedHandshakeSource])
		}
		return
	}
	reasons := slices.Sorted(maps.Keys(refused))
	parts := make([]string, len(reasons))
	for i, k := range reasons {
		parts[i] = fmt.Sprintf("%s=%d", k, refused[k])
	}
	fmt.Fprintf(w, "refused by design: %d (%s): the server's admission control, counted apart from failures and throughput\n", total, strings.Join(parts, " "))
	for _, k := range reasons {
		if rem := lkr.Remedies[k]; rem != "" {
			fmt.Fprintf(w, "  to admit more (%s): %s\n", k, rem)
		}
	}
}

// closedDuringHandshake counts the attempts whose TLS handshake ended with the stream closed.
func closedDuringHandshake(r *lkr.Result) int64 {
	if r.Attempts == nil {
		return 0
	}
	return r.Attempts.Reasons[lkr.ClassTLS+":EOF"] + r.Attempts.Reasons[lkr.ClassTLS+":ECONNRESET"]
}

// serverBytesPerHeld is the server's resident memory growth from the run's first sample to its
// largest, per held connection, where the timeline's server samples carry process_rss_bytes.
func serverBytesPerHeld(r *lkr.Result) (float64, bool) {
	if r.Hold == nil || r.Hold.Held <= 0 {
		return 0, false
	}
	first, peak, seen := 0.0, 0.0, false
	for _, iv := range r.Intervals {
		v, ok := iv.Server["process_rss_bytes"]
		if !ok {
			continue
		}
		if !seen {
			first, seen = v, true
		}
		peak = max(peak, v)
	}
	if !seen || peak <= first {
		return 0, false
	}
	return (peak - first) / float64(r.Hold.Held), true
}

func latencyText(h *hist.Histogram) string {
	if h == nil || h.Count() == 0 {
		return ""
	}
	s := h.Summary()
	return fmt.Sprintf(", latency p50 %s p99 %s", MsText(s.P50Ms), MsText(s.P99Ms))
}

func rateText(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// MsText renders a latency given in milliseconds with a unit that suits it (hist.MsText).
func MsText(ms float64) string { return hist.MsText(ms) }

// DurationText renders a duration with three significant digits in µs, ms or s (hist.DurationText).
func DurationText(d time.Duration) string { return hist.DurationText(d) }
