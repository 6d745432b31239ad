package linkkeysload

import (
	"fmt"
	"io"
	"time"

	"github.com/loadproof/loadproof/internal/hist"
)

// The seed's output lines. Header and DONE lines are byte for byte the seed's (they are message
// texts a compatible tool must keep). The NOTE paragraphs carry the same meaning as the seed's but
// are written in our own words: we do not copy upstream prose. Lines we add beyond the seed come
// after the seed's lines of each block, so a reader of the seed's output finds its lines where they
// were.

// noteConnections is our wording of the seed's connections NOTE.
const noteConnections = "  NOTE: 'established' counts the TLS handshakes this client saw complete. On its own it " +
	"cannot tell a connection the server's handshake rate limiter turned away from one that failed or was " +
	"closed for some other reason; the server process's METRICS lines (shed_handshake_*, " +
	"handshake_rejections) hold that breakdown, so read them next to these counts."

// noteRequestErrors is our wording of the seed's request-bench NOTE, printed when errors > 0.
const noteRequestErrors = "  NOTE: errors include requests refused by the server's anonymous public-read rate " +
	"limiter (PUBLIC_READ_* environment variables), not only network failures. To measure raw dispatch " +
	"or cache throughput instead of the default DoS-protection ceiling, raise " +
	"PUBLIC_READ_RATE_PER_MINUTE and PUBLIC_READ_GLOBAL_* on the server process. See docs/load-testing.md."

// noteDDoS is our wording of the seed's ddos paragraph.
const noteDDoS = "  On its own this client cannot separate a denial by the server's handshake rate limiter " +
	"from any other failure in the TLS stage (see the NOTE of the connections subcommand). The " +
	"authoritative distinct-source figures for this run are in the server process's METRICS lines: " +
	"shed_handshake_per_source, shed_handshake_overflow, shed_handshake_global and open_connections. " +
	"See docs/load-testing.md."

// WriteConnectionsHeader prints the connections header line.
func WriteConnectionsHeader(w io.Writer, cfg ConnectionsConfig) {
	fmt.Fprintf(w, "connections: target=%d concurrency=%d hold_secs=%d client_ips=%d (base %s)\n",
		cfg.Count, cfg.Concurrency, cfg.HoldSecs, max(cfg.Sources.Count, 1), cfg.Sources.Base)
}

// WriteConnectionsDone prints the DONE line, the failure reasons (seed classes, then our detailed
// reasons), the NOTE and our summary lines.
func WriteConnectionsDone(w io.Writer, cfg ConnectionsConfig, r Result) {
	a := r.Attempts
	if a == nil {
		a = newAttempts()
	}
	fmt.Fprintf(w, "connections: DONE in %s \u2014 requested=%d established=%d failed=%d\n",
		FormatRustDuration(time.Duration(r.Elapsed)), cfg.Count, a.Succeeded, a.Failed)
	if a.Failed > 0 {
		fmt.Fprintf(w, "  failure reasons: %s\n", FormatRustMap(a.Classes))
		fmt.Fprintf(w, "  failure details: %s\n", FormatRustMap(a.Reasons))
	}
	fmt.Fprintln(w, noteConnections)
	if h := r.Hold; h != nil {
		fmt.Fprintf(w, "  held: %d connections at once for %ds after the last attempt (ramp %s, %d process(es)); %d still established at the end of the hold (%d closed by the server); client RSS %.2f KiB per held connection\n",
			h.Held, h.HoldSecs, FormatRustDuration(time.Duration(h.RampTime)), max(len(r.Segments), 1), h.StillOpen, h.Held-h.StillOpen, h.BytesPerConn/1024)
		writeHoldLoss(w, r.Target, h)
	}
	writeLatency(w, "connect+handshake latency", a.Latency)
	writeCPU(w, r)
}

// writeHoldLoss prints the LOST line: how many held connections ended during the hold, when, and
// why as far as the client saw.
func writeHoldLoss(w io.Writer, t Target, h *Hold) {
	l := h.Loss
	if l == nil {
		return
	}
	when := "at times the client did not see"
	switch first, last := sinceHold(l.First, h.Start), sinceHold(l.Last, h.Start); {
	case l.First.IsZero():
	case first == last:
		when = "all " + first
	default:
		when = "the first " + first + ", the last " + last
	}
	fmt.Fprintf(w, "  LOST: %d of %d held connections ended during the hold (%s), %s", l.Lost, h.Held, FormatRustMap(l.Reasons), when)
	if l.ServerGone {
		fmt.Fprintf(w, "; the server process (pid %d) is no longer running", t.PID)
	}
	fmt.Fprintf(w, "; the hold was not held (it lasted %s of %ds)\n", FormatRustDuration(time.Duration(h.Lasted).Round(time.Millisecond)), h.HoldSecs)
}

// sinceHold renders t relative to the start of the hold, to the millisecond.
func sinceHold(t, start time.Time) string {
	if start.IsZero() {
		return "at " + t.UTC().Format(time.RFC3339Nano)
	}
	d := t.Sub(start).Round(time.Millisecond)
	switch {
	case d < 0:
		return FormatRustDuration(-d) + " before it began"
	case d == 0:
		return "within 1ms of its start"
	}
	return FormatRustDuration(d) + " after it began"
}

// WriteHandshakeHeader prints the handshake-bench header line.
func WriteHandshakeHeader(w io.Writer, cfg HandshakeConfig) {
	fmt.Fprintf(w, "handshake-bench: duration_secs=%d concurrency=%d\n", cfg.DurationSecs, cfg.Concurrency)
}

// WriteHandshakeDone prints the DONE line and our summary lines.
func WriteHandshakeDone(w io.Writer, cfg HandshakeConfig, r Result) {
	h := r.Handshakes
	if h == nil {
		h = &Handshakes{}
	}
	fmt.Fprintf(w, "handshake-bench: DONE \u2014 completed=%d failed=%d over %ds => %s handshakes/sec (client-observed; this is a DIFFERENT number from established-connection COUNT)\n",
		h.Completed, h.Failed, cfg.DurationSecs, FormatRustFloat1(rustRate(h.Completed, cfg.DurationSecs)))
	if a := r.Attempts; a != nil && a.Failed > 0 {
		fmt.Fprintf(w, "  failure details: %s\n", FormatRustMap(a.Reasons))
	}
	if cfg.Resume {
		fmt.Fprintf(w, "  resumption: full=%d (%s/sec) resumed=%d (%s/sec)\n",
			h.Full, FormatRustFloat1(rustRate(h.Full, cfg.DurationSecs)), h.Resumed, FormatRustFloat1(rustRate(h.Resumed, cfg.DurationSecs)))
	}
	if r.Attempts != nil {
		writeLatency(w, "connect+handshake latency", r.Attempts.Latency)
	}
	writeCPU(w, r)
}

// WriteRequestHeader prints the request-bench header line.
func WriteRequestHeader(w io.Writer, cfg RequestConfig) {
	fmt.Fprintf(w, "request-bench: op=%s connections=%d duration_secs=%d\n", cfg.Op, cfg.Connections, cfg.DurationSecs)
}

// WriteRequestEstablished prints the line after the connections are set up.
func WriteRequestEstablished(w io.Writer, n int64) {
	fmt.Fprintf(w, "  %d persistent connections established\n", n)
}

// WriteRequestDone prints the DONE line, the NOTE when there were errors, and our summary lines.
func WriteRequestDone(w io.Writer, cfg RequestConfig, r Result) {
	q := r.Requests
	if q == nil {
		q = &Requests{}
	}
	fmt.Fprintf(w, "request-bench: DONE \u2014 completed=%d errors=%d over %ds => %s requests/sec (a DIFFERENT number from connection count and handshake rate)\n",
		q.Completed, q.Errors, cfg.DurationSecs, FormatRustFloat1(rustRate(q.Completed, cfg.DurationSecs)))
	if q.Errors > 0 {
		fmt.Fprintln(w, noteRequestErrors)
		fmt.Fprintf(w, "  error details: statuses=%s decode_errors=%d io_errors=%d\n", FormatRustMap(q.Statuses), q.DecodeErrors, q.IOErrors)
	}
	if cfg.Rate > 0 {
		fmt.Fprintf(w, "  open model: target %s requests/sec, sent=%d late_sends=%d (more than %s after the intended time) unsent=%d\n",
			FormatRustFloat1(cfg.Rate), q.Sent, q.LateSends, FormatRustDuration(time.Duration(q.LateThreshold)), q.Unsent)
		writeLatency(w, "latency from intended send (corrected)", q.Latency)
		writeLatency(w, "latency from actual send (uncorrected)", q.Uncorrected)
	} else {
		writeLatency(w, fmt.Sprintf("latency (pipeline %d)", max(cfg.Pipeline, 1)), q.Latency)
	}
	writeCPU(w, r)
}

// WriteDDoSHeader prints the ddos header line.
func WriteDDoSHeader(w io.Writer, cfg DDoSConfig) {
	fmt.Fprintf(w, "ddos: sources=%d concurrency=%d (one connection attempt per distinct source address)\n", cfg.Sources, cfg.Concurrency)
}

// WriteDDoSDone prints the DONE line, the paragraph, and our lines (denial reasons, the server's
// accounting next to the client's).
func WriteDDoSDone(w io.Writer, cfg DDoSConfig, r Result) {
	a := r.Attempts
	if a == nil {
		a = newAttempts()
	}
	fmt.Fprintf(w, "ddos: DONE in %s \u2014 sources=%d client-observed-allowed=%d client-observed-denied=%d\n",
		FormatRustDuration(time.Duration(r.Elapsed)), cfg.Sources, a.Succeeded, a.Failed)
	fmt.Fprintln(w, noteDDoS)
	if a.Failed > 0 {
		fmt.Fprintf(w, "  denial reasons: %s\n", FormatRustMap(a.Reasons))
	}
	writeLatency(w, "connect+handshake latency (allowed)", a.Latency)
	writeCPU(w, r)
}

// writeCPU prints where the CPU went: the client's (all its processes) and, when the server's pid
// was readable, the server's, each in total, per attempt and per success (see CPUPer). Nothing
// when no CPU was measured.
func writeCPU(w io.Writer, r Result) {
	c := r.cpuPer()
	if c == nil {
		return
	}
	per := func(d *Duration) string {
		if d == nil {
			return "-"
		}
		return FormatRustDuration(time.Duration(*d))
	}
	fmt.Fprintf(w, "  cpu: client %s (%s per attempt, %s per %s)", FormatRustDuration(time.Duration(r.ClientCPU)),
		per(c.ClientPerAttempt), per(c.ClientPerSuccess), c.SuccessUnit)
	if r.ServerCPU != nil {
		fmt.Fprintf(w, ", server %s (%s per attempt, %s per %s)", FormatRustDuration(time.Duration(*r.ServerCPU)),
			per(c.ServerPerAttempt), per(c.ServerPerSuccess), c.SuccessUnit)
	}
	fmt.Fprintln(w)
}

// writeLatency prints one histogram summary line; nothing for an empty histogram.
func writeLatency(w io.Writer, name string, h *hist.Histogram) {
	if h == nil || h.Count() == 0 {
		return
	}
	s := h.Summary()
	fmt.Fprintf(w, "  %s: n=%d p50=%s p90=%s p99=%s p99.9=%s p99.99=%s max=%s\n", name, s.Count,
		msText(s.P50Ms), msText(s.P90Ms), msText(s.P99Ms), msText(s.P999Ms), msText(s.P9999Ms), msText(s.MaxMs))
}

func msText(ms float64) string {
	return fmt.Sprintf("%.3fms", ms)
}
