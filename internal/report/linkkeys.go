package report

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/linkkeys"
	lkr "github.com/loadproof/loadproof/internal/linkkeysresult"
	"github.com/loadproof/loadproof/internal/result"
)

// The LinkKeys clients' lines. Header and DONE lines are byte for byte the seed's (they are message
// texts a compatible tool must keep); the clients print them through these functions while they run,
// and LinkKeysText redraws them from a result file. The NOTE paragraphs carry the same meaning as the
// seed's but are written in our own words: we do not copy upstream prose. Lines we add beyond the
// seed come after the seed's lines of each block, so a reader of the seed's output finds its lines
// where they were.

// NoteLinkKeysConnections is our wording of the seed's connections NOTE.
const NoteLinkKeysConnections = "  NOTE: 'established' counts the TLS handshakes this client saw complete. On its own it " +
	"cannot tell a connection the server's handshake rate limiter turned away from one that failed or was " +
	"closed for some other reason; the server process's METRICS lines (shed_handshake_*, " +
	"handshake_rejections) hold that breakdown, so read them next to these counts."

// NoteLinkKeysRequestErrors is our wording of the seed's request-bench NOTE, printed when errors > 0.
const NoteLinkKeysRequestErrors = "  NOTE: errors include requests refused by the server's anonymous public-read rate " +
	"limiter (PUBLIC_READ_* environment variables), not only network failures. To measure raw dispatch " +
	"or cache throughput instead of the default DoS-protection ceiling, raise " +
	"PUBLIC_READ_RATE_PER_MINUTE and PUBLIC_READ_GLOBAL_* on the server process. See docs/load-testing.md."

// NoteLinkKeysDDoS is our wording of the seed's ddos paragraph.
const NoteLinkKeysDDoS = "  On its own this client cannot separate a denial by the server's handshake rate limiter " +
	"from any other failure in the TLS stage (see the NOTE of the connections subcommand). The " +
	"authoritative distinct-source figures for this run are in the server process's METRICS lines: " +
	"shed_handshake_per_source, shed_handshake_overflow, shed_handshake_global and open_connections. " +
	"See docs/load-testing.md."

// LinkKeysHeader prints a client command's header line.
func LinkKeysHeader(w io.Writer, command string, p lkr.Params) {
	w = TextWriter(w)
	switch command {
	case lkr.CmdConnections:
		fmt.Fprintf(w, "connections: target=%d concurrency=%d hold_secs=%d client_ips=%d (base %s)\n",
			p.Count, p.Concurrency, p.HoldSecs, max(p.ClientIPCount, 1), p.ClientIPBase)
	case lkr.CmdHandshakeBench:
		fmt.Fprintf(w, "handshake-bench: duration_secs=%d concurrency=%d\n", p.DurationSecs, p.Concurrency)
	case lkr.CmdRequestBench:
		fmt.Fprintf(w, "request-bench: op=%s connections=%d duration_secs=%d\n", p.Op, p.Connections, p.DurationSecs)
	case lkr.CmdDDoS:
		fmt.Fprintf(w, "ddos: sources=%d concurrency=%d (one connection attempt per distinct source address)\n", p.Sources, p.Concurrency)
	}
}

// LinkKeysEstablished prints request-bench's line after its connections are set up.
func LinkKeysEstablished(w io.Writer, n int64) {
	fmt.Fprintf(w, "  %d persistent connections established\n", n)
}

// LinkKeysDone prints a client command's DONE line and the lines that follow it.
func LinkKeysDone(w io.Writer, command string, p lkr.Params, r *lkr.Result) {
	w = TextWriter(w)
	switch command {
	case lkr.CmdConnections:
		connectionsDone(w, p, r)
	case lkr.CmdHandshakeBench:
		handshakeDone(w, p, r)
	case lkr.CmdRequestBench:
		requestDone(w, p, r)
	case lkr.CmdDDoS:
		ddosDone(w, p, r)
	}
	writeHosts(w, r.Machines)
}

// connectionsDone prints the DONE line, the failure reasons (seed classes, then our detailed
// reasons), the NOTE and our summary lines.
func connectionsDone(w io.Writer, p lkr.Params, r *lkr.Result) {
	a := r.Attempts
	if a == nil {
		a = lkr.NewAttempts()
	}
	fmt.Fprintf(w, "connections: DONE in %s \u2014 requested=%d established=%d failed=%d\n",
		lkr.FormatRustDuration(time.Duration(r.Elapsed)), p.Count, a.Succeeded, a.Failed)
	if a.Failed > 0 {
		fmt.Fprintf(w, "  failure reasons: %s\n", Sanitize(lkr.FormatRustMap(a.Classes)))
		fmt.Fprintf(w, "  failure details: %s\n", Sanitize(lkr.FormatRustMap(a.Reasons)))
	}
	fmt.Fprintln(w, NoteLinkKeysConnections)
	if h := r.Hold; h != nil {
		// The seed's line always ends with the client RSS; a combined run's held stream, whose
		// process also runs the other streams, has no RSS of its own and leaves it out.
		fmt.Fprintf(w, "  held: %d connections at once for %ds after the last attempt (ramp %s, %d process(es)); %d still established at the end of the hold (%d closed by the server)",
			h.Held, h.HoldSecs, lkr.FormatRustDuration(time.Duration(h.RampTime)), max(len(r.Segments), 1), h.StillOpen, h.Held-h.StillOpen)
		if r.Command != lkr.CmdCombined && r.Combined == nil {
			fmt.Fprintf(w, "; client RSS %.2f KiB per held connection", h.BytesPerConn/1024)
		}
		fmt.Fprintln(w)
		writeHoldLoss(w, r.TargetInfo, h)
	}
	writeLatency(w, "connect+handshake latency", a.Latency)
	writeCPU(w, r)
}

// handshakeDone prints the DONE line and our summary lines.
func handshakeDone(w io.Writer, p lkr.Params, r *lkr.Result) {
	h := r.Handshakes
	if h == nil {
		h = &lkr.Handshakes{}
	}
	fmt.Fprintf(w, "handshake-bench: DONE \u2014 completed=%d failed=%d over %ds => %s handshakes/sec (client-observed; this is a DIFFERENT number from established-connection COUNT)\n",
		h.Completed, h.Failed, p.DurationSecs, lkr.FormatRustFloat1(lkr.RustRate(h.Completed, p.DurationSecs)))
	if a := r.Attempts; a != nil && a.Failed > 0 {
		fmt.Fprintf(w, "  failure details: %s\n", Sanitize(lkr.FormatRustMap(a.Reasons)))
	}
	if p.Resume {
		fmt.Fprintf(w, "  resumption: full=%d (%s/sec) resumed=%d (%s/sec)\n",
			h.Full, lkr.FormatRustFloat1(lkr.RustRate(h.Full, p.DurationSecs)), h.Resumed, lkr.FormatRustFloat1(lkr.RustRate(h.Resumed, p.DurationSecs)))
	}
	if r.Attempts != nil {
		writeLatency(w, "connect+handshake latency", r.Attempts.Latency)
	}
	writeCPU(w, r)
}

// requestDone prints the DONE line, the NOTE when there were errors, and our summary lines.
func requestDone(w io.Writer, p lkr.Params, r *lkr.Result) {
	q := r.Requests
	if q == nil {
		q = &lkr.Requests{}
	}
	fmt.Fprintf(w, "request-bench: DONE \u2014 completed=%d errors=%d over %ds => %s requests/sec (a DIFFERENT number from connection count and handshake rate)\n",
		q.Completed, q.Errors, p.DurationSecs, lkr.FormatRustFloat1(lkr.RustRate(q.Completed, p.DurationSecs)))
	if q.Errors > 0 {
		fmt.Fprintln(w, NoteLinkKeysRequestErrors)
		fmt.Fprintf(w, "  error details: statuses=%s decode_errors=%d io_errors=%d\n", Sanitize(lkr.FormatRustMap(q.Statuses)), q.DecodeErrors, q.IOErrors)
	}
	if p.Rate > 0 {
		fmt.Fprintf(w, "  open model: target %s requests/sec, sent=%d late_sends=%d (more than %s after the intended time) unsent=%d\n",
			lkr.FormatRustFloat1(p.Rate), q.Sent, q.LateSends, lkr.FormatRustDuration(time.Duration(q.LateThreshold)), q.Unsent)
		writeLatency(w, "latency from intended send (corrected)", q.Latency)
		writeLatency(w, "latency from actual send (uncorrected)", q.Uncorrected)
	} else {
		writeLatency(w, fmt.Sprintf("latency (pipeline %d)", max(p.Pipeline, 1)), q.Latency)
	}
	writeCPU(w, r)
}

// ddosDone prints the DONE line, the paragraph, and our lines (denial reasons, latency, CPU).
func ddosDone(w io.Writer, p lkr.Params, r *lkr.Result) {
	a := r.Attempts
	if a == nil {
		a = lkr.NewAttempts()
	}
	fmt.Fprintf(w, "ddos: DONE in %s \u2014 sources=%d client-observed-allowed=%d client-observed-denied=%d\n",
		lkr.FormatRustDuration(time.Duration(r.Elapsed)), p.Sources, a.Succeeded, a.Failed)
	fmt.Fprintln(w, NoteLinkKeysDDoS)
	if a.Failed > 0 {
		fmt.Fprintf(w, "  denial reasons: %s\n", Sanitize(lkr.FormatRustMap(a.Reasons)))
	}
	writeLatency(w, "connect+handshake latency (allowed)", a.Latency)
	writeCPU(w, r)
}

// writeHoldLoss prints the LOST line: how many held connections ended during the hold, when, and
// why as far as the client saw. Nothing when the hold was held.
func writeHoldLoss(w io.Writer, t lkr.Target, h *lkr.Hold) {
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
	fmt.Fprintf(w, "  LOST: %d of %d held connections ended during the hold (%s), %s", l.Lost, h.Held, Sanitize(lkr.FormatRustMap(l.Reasons)), when)
	if l.ServerGone {
		fmt.Fprintf(w, "; the server process (pid %d) is no longer running", t.PID)
	}
	fmt.Fprintf(w, "; the hold was not held (it lasted %s of %ds)\n", lkr.FormatRustDuration(time.Duration(h.Lasted).Round(time.Millisecond)), h.HoldSecs)
}

// sinceHold renders t relative to the start of the hold, to the millisecond.
func sinceHold(t, start time.Time) string {
	if start.IsZero() {
		return "at " + t.UTC().Format(time.RFC3339Nano)
	}
	d := t.Sub(start).Round(time.Millisecond)
	switch {
	case d < 0:
		return lkr.FormatRustDuration(-d) + " before it began"
	case d == 0:
		return "within 1ms of its start"
	}
	return lkr.FormatRustDuration(d) + " after it began"
}

// writeCPU prints where the CPU went: the client's (all its processes) and, when the server's pid
// was readable, the server's, each in total, per attempt and per success (see lkr.CPUPer). Nothing
// when no CPU was measured. The figures are computed from the counts (as Finish does), so a result
// built without Finish prints them too.
func writeCPU(w io.Writer, r *lkr.Result) {
	c := r.CPUPerOp()
	if c == nil {
		return
	}
	per := func(d *lkr.Duration) string {
		if d == nil {
			return "-"
		}
		return lkr.FormatRustDuration(time.Duration(*d))
	}
	fmt.Fprintf(w, "  cpu: client %s (%s per attempt, %s per %s)", lkr.FormatRustDuration(time.Duration(r.ClientCPU)),
		per(c.ClientPerAttempt), per(c.ClientPerSuccess), c.SuccessUnit)
	if r.ServerCPU != nil {
		fmt.Fprintf(w, ", server %s (%s per attempt, %s per %s)", lkr.FormatRustDuration(time.Duration(*r.ServerCPU)),
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

// LinkKeysAccounting prints the server's accounting next to the client's (the lines after the
// seed's paragraph in ddos and connections).
func LinkKeysAccounting(w io.Writer, a *lkr.ServerAccounting) {
	w = TextWriter(w)
	if a == nil {
		return
	}
	d := a.Delta
	rss := "null"
	if a.After.ProcessRSSBytes != nil {
		rss = fmt.Sprint(*a.After.ProcessRSSBytes)
	}
	fmt.Fprintf(w, "  server accounting (METRICS deltas from %s): accepted_connections=%d admitted=%d shed_connection_limit=%d shed_handshake_per_source=%d shed_handshake_overflow=%d shed_handshake_global=%d handshake_rejections=%d handshake_timeouts=%d",
		a.Source, d.Accepted, d.Admitted, d.ShedConnectionLimit, d.ShedPerSource, d.ShedOverflow, d.ShedGlobal, d.HandshakeRejections, d.HandshakeTimeouts)
	if d.HasCompleted {
		fmt.Fprintf(w, " handshakes_completed=%d", d.HandshakesCompleted)
	}
	fmt.Fprintf(w, " open_connections=%d process_rss_bytes=%s\n", a.After.OpenConnections, rss)
	if g, ok := a.After.HostTCPGrowth(a.Before); ok {
		fmt.Fprintf(w, "  server host TCP (its network namespace, every socket there; deltas over the run):")
		for i, name := range linkkeys.HostTCPFields {
			fmt.Fprintf(w, " %s=%d", strings.TrimPrefix(name, "host_tcp_"), g[i])
		}
		fmt.Fprintln(w)
	}
	parts := make([]string, len(a.Checks))
	for i, c := range a.Checks {
		verdict := "ok"
		if !c.OK {
			verdict = fmt.Sprintf("MISMATCH (difference %+d)", c.Client-c.Server)
		}
		parts[i] = fmt.Sprintf("%s: %d vs %d %s", c.Name, c.Client, c.Server, verdict)
	}
	fmt.Fprintf(w, "  client vs server: %s\n", strings.Join(parts, "; "))
	if !a.Settled {
		fmt.Fprintln(w, "  WARNING: no server reading without handshakes in progress arrived after the run; the server counts may still be moving.")
	}
	if a.Mismatch() {
		fmt.Fprintln(w, "  WARNING: the server's accounting does not match this client's attempts. Other traffic to the server during the run, attempts that never reached it (see the failure reasons), or a counting fault in the server explain a difference.")
	}
	if a.Note != "" {
		fmt.Fprintf(w, "  note: %s\n", a.Note)
	}
}

// LinkKeysAccountingError prints why the server's accounting could not be read.
func LinkKeysAccountingError(w io.Writer, a *lkr.ServerAccounting) {
	w = TextWriter(w)
	fmt.Fprintf(w, "  server accounting unavailable (%s): %s\n", a.Source, a.Note)
}

// LinkKeysText redraws a client command's lines from its result file alone (the flags it recorded,
// its counts and histograms), so the results of several workers or machines, merged with
// linkkeysresult.Merge, are reported as one run: the header and DONE lines, the server's accounting,
// then our lines about the timeline and the machines.
func LinkKeysText(w io.Writer, r *lkr.Result) error {
	w = TextWriter(w)
	switch r.Command {
	case lkr.CmdConnections, lkr.CmdHandshakeBench, lkr.CmdRequestBench, lkr.CmdDDoS:
	case lkr.CmdCombined:
		if r.Combined == nil {
			return fmt.Errorf("report: a combined result without its combined section")
		}
		var streams []string
		for _, s := range r.Combined.Streams {
			streams = append(streams, fmt.Sprintf("%s=%s+%d", s.Name, s.SourceFirst, s.SourceCount))
		}
		LinkKeysCombinedHeader(w, streams)
		LinkKeysCombinedDone(w, r)
		writeTimeline(w, r)
		writeMachine(w, r)
		writeCost(w, &r.Envelope)
		return nil
	default:
		return fmt.Errorf("report: cannot report a LinkKeys result of command %q", r.Command)
	}
	p := lkr.ParamsFromFlags(r.Flags)
	LinkKeysHeader(w, r.Command, p)
	LinkKeysDone(w, r.Command, p, r)
	if r.Server != nil {
		if len(r.Server.Checks) == 0 && r.Server.Note != "" {
			LinkKeysAccountingError(w, r.Server)
		} else {
			LinkKeysAccounting(w, r.Server)
		}
	}
	LinkKeysHeadline(w, r)
	writeTimeline(w, r)
	writeMachine(w, r)
	writeCost(w, &r.Envelope)
	return nil
}

func writeMachine(w io.Writer, r *lkr.Result) {
	if len(r.Machines) > 0 {
		m := r.Machines[0]
		fmt.Fprintf(w, "machine: %s, %d cores, kernel %s, nofile %d/%d, %s, loadproof %s; segments %d, machine records %d\n",
			m.CPUModel, m.Cores, m.Kernel, m.NofileSoft, m.NofileHard, m.GoVersion, m.LoadproofVersion, max(len(r.Segments), 1), len(r.Machines))
	}
}

// writeTimeline summarises the interval snapshots: how many, the busiest interval's rate, and the
// server samples' range where the run took them.
func writeTimeline(w io.Writer, r *lkr.Result) {
	if len(r.Intervals) == 0 {
		return
	}
	var peak float64
	var samples int
	lo, hi := map[string]float64{}, map[string]float64{}
	for _, iv := range r.Intervals {
		if iv.Secs > 0 {
			peak = max(peak, float64(iv.Total())/iv.Secs)
		}
		if len(iv.Server) > 0 {
			samples++
		}
		for k, v := range iv.Server {
			if old, ok := lo[k]; !ok || v < old {
				lo[k] = v
			}
			hi[k] = max(hi[k], v)
		}
	}
	fmt.Fprintf(w, "  timeline: %d intervals of %gs, busiest %s operations/sec", len(r.Intervals), r.IntervalSecs, lkr.FormatRustFloat1(peak))
	if samples > 0 {
		fmt.Fprintf(w, "; server samples in %d", samples)
		for _, k := range []string{"process_rss_bytes", "open_connections", "established_connections", "frame_buffer_bytes"} {
			if _, ok := hi[k]; ok {
				fmt.Fprintf(w, ", %s %.0f..%.0f", Sanitize(k), lo[k], hi[k])
			}
		}
	}
	if n := r.CounterTotal(result.CounterServerSeriesDropped); n > 0 {
		fmt.Fprintf(w, "; %d server series readings dropped (the target exposes more distinct series than a run keeps)", n)
	}
	fmt.Fprintln(w)
}
