package report

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/loadproof/loadproof/internal/keycastresult"
	"github.com/loadproof/loadproof/internal/result"
)

// Formats accepted by the report command.
const (
	FormatText = "text"
	FormatJSON = "json"
	FormatCSV  = "csv"
)

// Render renders r in format (text, json or csv).
func Render(r *keycastresult.Results, format string) (string, error) {
	switch format {
	case FormatText, "":
		return SanitizeText(Text(r)), nil
	case FormatCSV:
		return CSV(r), nil
	case FormatJSON:
		b, err := JSON(r)
		return string(b), err
	}
	return "", fmt.Errorf("report: unknown format %q; want text, json or csv", format)
}

// f1 formats v with one decimal as Rust's {:.1}.
func f1(v float64) string { return rustFloat(v, 1, false) }

// rustFloat formats like Rust's {:.N} (plus: {:+.N}).
func rustFloat(v float64, prec int, plus bool) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		if plus {
			return "+inf"
		}
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	}
	s := strconv.FormatFloat(v, 'f', prec, 64)
	if plus && !strings.HasPrefix(s, "-") {
		s = "+" + s
	}
	return s
}

// Text is upstream's TestResults::format_text (no trailing newline), followed by the loadproof
// block when the results carry loadproof's additions.
func Text(r *keycastresult.Results) string {
	m, s := r.Metadata, r.Summary
	var b strings.Builder
	b.WriteString("Keycast Load Test Results\n")
	b.WriteString("=========================\n")
	fmt.Fprintf(&b, "Target:        %s/api/nostr\n", Sanitize(m.URL))
	fmt.Fprintf(&b, "Scenario:      %s\n", Sanitize(m.Scenario))
	fmt.Fprintf(&b, "Method:        %s\n", Sanitize(m.Method))
	fmt.Fprintf(&b, "Concurrency:   %d\n", m.Concurrency)
	fmt.Fprintf(&b, "Duration:      %ss\n", f1(s.DurationSecs))
	fmt.Fprintf(&b, "Users:         %d\n", m.UserCount)
	b.WriteString("\nSummary:\n")
	fmt.Fprintf(&b, "  Requests:      %d\n", s.TotalRequests)
	fmt.Fprintf(&b, "  Throughput:    %s req/s\n", f1(s.RequestsPerSecond))
	fmt.Fprintf(&b, "  Success Rate:  %s%%\n", f1((1-s.ErrorRate)*100))
	b.WriteString("\nLatency (ms):\n")
	fmt.Fprintf(&b, "  Min:   %s\n", f1(s.LatencyMinMs))
	fmt.Fprintf(&b, "  p50:   %s\n", f1(s.LatencyP50Ms))
	fmt.Fprintf(&b, "  p95:   %s\n", f1(s.LatencyP95Ms))
	fmt.Fprintf(&b, "  p99:   %s\n", f1(s.LatencyP99Ms))
	fmt.Fprintf(&b, "  Max:   %s\n", f1(s.LatencyMaxMs))
	b.WriteString("\nCache (estimated):\n")
	fmt.Fprintf(&b, "  Hits:   %s%%\n", f1(s.CacheHitRatio*100))
	fmt.Fprintf(&b, "  Misses: %s%%\n", f1((1-s.CacheHitRatio)*100))
	b.WriteString("\nErrors:\n")
	fmt.Fprintf(&b, "  Auth:    %d\n", s.ErrorsAuth)
	fmt.Fprintf(&b, "  Server:  %d\n", s.ErrorsServer)
	fmt.Fprintf(&b, "  Client:  %d\n", s.ErrorsClient)
	fmt.Fprintf(&b, "  Network: %d", s.ErrorsNetwork)
	if extra := Additions(r); extra != "" {
		b.WriteString("\n\n")
		b.WriteString(extra)
	}
	return b.String()
}

// HasAdditions reports whether r carries figures the upstream layout has no place for.
func HasAdditions(r *keycastresult.Results) bool { return Additions(r) != "" }

// Additions renders loadproof's block (no trailing newline), or "" when r has none of its figures.
func Additions(r *keycastresult.Results) string {
	s := r.Summary
	var lines []string
	add := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	if r.Latency() != nil || s.LatencyP999Ms != 0 || s.LatencyP9999Ms != 0 {
		add("  p90:    %s", f1(s.LatencyP90Ms))
		add("  p99.9:  %s", f1(s.LatencyP999Ms))
		add("  p99.99: %s", f1(s.LatencyP9999Ms))
		add("  Mean:   %s", f1(s.LatencyMeanMs))
	}
	if s.RateLimitedRequests != 0 || s.IntentionalRejections != 0 || s.ErrorsOther != 0 || r.Latency() != nil {
		add("  Rate limited (429):        %d", s.RateLimitedRequests)
		add("  Intentional shedding (503 admission_rejected): %d (%s%%)", s.IntentionalRejections, f1(s.IntentionalRejectionRate*100))
		add("  Other failures:            %d", s.ErrorsOther)
		add("  Unintentional error rate:  %s%%", f1(s.UnintentionalErrorRate*100))
	}
	if s.CutOffRequests != 0 {
		add("  Cut off in flight:         %d (outcome unknown: in no other figure)", s.CutOffRequests)
	}
	if s.ConnectFailures != 0 {
		add("  Connect failures:          %d (no connection could be opened; not requests, but failed attempts in the rates)", s.ConnectFailures)
	}
	if r.Envelope != nil {
		if n := r.CounterTotal(result.CounterServerSeriesDropped); n > 0 {
			add("  Server series dropped:     %d readings (the target exposes more distinct series than a run keeps)", n)
		}
		if hl := HostLines(r.Machines); len(hl) > 0 {
			add("  Kernel counters and CPU over the run, per host:")
			lines = append(lines, hl...)
		}
	}
	if len(lines) == 0 && r.OpenModel == nil && r.Stop == nil && len(r.FailureCauses()) == 0 && costText(r.Envelope) == "" {
		return ""
	}
	var b strings.Builder
	b.WriteString("Additional figures (loadproof):\n")
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	if om := r.OpenModel; om != nil {
		b.WriteString("\nOpen model (latency above from the intended send time):\n")
		fmt.Fprintf(&b, "  Target rate:   %s req/s", f1(om.TargetRate))
		if om.RampSecs > 0 {
			fmt.Fprintf(&b, " (ramped from %s over %ss)", f1(om.RampFrom), f1(om.RampSecs))
		}
		b.WriteByte('\n')
		fmt.Fprintf(&b, "  Scheduled:     %d\n", om.Scheduled)
		fmt.Fprintf(&b, "  Late (>%sms): %d\n", f1(om.LateThresholdMs), om.LateSends)
		fmt.Fprintf(&b, "  Dropped:       %d\n", om.Dropped)
		fmt.Fprintf(&b, "  Uncorrected (ms, from the actual send): p50 %s  p95 %s  p99 %s  p99.9 %s  max %s\n",
			f1(om.UncorrectedP50Ms), f1(om.UncorrectedP95Ms), f1(om.UncorrectedP99Ms), f1(om.UncorrectedP999Ms), f1(om.UncorrectedMaxMs))
	}
	if st := r.Stop; st != nil {
		b.WriteString("\nStopped early: ")
		b.WriteString(st.Reason)
		if st.Metric != "" {
			fmt.Fprintf(&b, " (%s %s above the limit %s over %ss)", st.Metric, strconv.FormatFloat(st.Observed, 'g', 6, 64),
				strconv.FormatFloat(st.Limit, 'g', 6, 64), f1(st.WindowSecs))
		}
		fmt.Fprintf(&b, " after %ss at %s\n", f1(st.ElapsedSecs), st.At)
	}
	if causes := r.FailureCauses(); len(causes) > 0 {
		b.WriteString("\nFailures by cause:\n")
		writeCauses(&b, causes)
	}
	if len(r.ConnectFailureCauses) > 0 {
		b.WriteString("\nConnect failures by cause:\n")
		writeCauses(&b, r.ConnectFailureCauses)
	}
	if sm := r.ServerMetrics; sm != nil && sm.Deltas != nil {
		d := sm.Deltas
		b.WriteString("\nServer metrics (after - before):\n")
		fmt.Fprintf(&b, "  RPC requests:  %d\n", d.HTTPRPCRequestsTotal)
		fmt.Fprintf(&b, "  RPC success:   %d\n", d.HTTPRPCSuccess)
		fmt.Fprintf(&b, "  Auth errors:   %d\n", d.HTTPRPCAuthErrors)
		fmt.Fprintf(&b, "  Cache hits:    %d\n", d.HTTPRPCCacheHits)
		fmt.Fprintf(&b, "  Cache misses:  %d\n", d.HTTPRPCCacheMisses)
		fmt.Fprintf(&b, "  Cache size:    %d\n", d.HTTPRPCCacheSize)
	}
	if r.Envelope != nil && len(r.Machines) > 0 {
		m := r.Machines[0]
		if len(r.Machines) > 1 {
			fmt.Fprintf(&b, "\nMachines: %d records (one per process or machine); the first:", len(r.Machines))
		}
		fmt.Fprintf(&b, "\nMachine: %s, %d cores (GOMAXPROCS %d), kernel %s, %s, loadproof %s\n",
			orUnknown(m.CPUModel), m.Cores, m.GOMAXPROCS, orUnknown(m.Kernel), m.GoVersion, m.LoadproofVersion)
	}
	if c := costText(r.Envelope); c != "" {
		b.WriteString("\n" + c + "\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// writeCauses writes one line per cause, most frequent first.
func writeCauses(b *strings.Builder, causes map[string]int64) {
	for _, k := range result.CausesByCount(causes) {
		fmt.Fprintf(b, "  %-32s %d\n", Sanitize(k), causes[k])
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// CSV is upstream's two-line CSV (no trailing newline).
func CSV(r *keycastresult.Results) string {
	m, s := r.Metadata, r.Summary
	return "url,scenario,method,concurrency,duration_secs,users,total_requests,rps,success_rate,p50_ms,p95_ms,p99_ms\n" +
		strings.Join([]string{
			Sanitize(m.URL), Sanitize(m.Scenario), Sanitize(m.Method), strconv.Itoa(m.Concurrency), f1(s.DurationSecs), strconv.Itoa(m.UserCount),
			strconv.FormatUint(s.TotalRequests, 10), f1(s.RequestsPerSecond), f1((1 - s.ErrorRate) * 100),
			f1(s.LatencyP50Ms), f1(s.LatencyP95Ms), f1(s.LatencyP99Ms),
		}, ",")
}

// JSON pretty-prints the results with every field, defaulted ones filled in (no trailing newline).
func JSON(r *keycastresult.Results) ([]byte, error) {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("report: encoding results: %w", err)
	}
	return b, nil
}

// Compare is upstream's comparison block (no trailing newline): current against baseline, with
// the change (cur − base)/base × 100 signed to one decimal.
func Compare(cur, base *keycastresult.Results) string {
	row := func(label string, c, b float64) string {
		return fmt.Sprintf("%s%s       %s       %s%%", label, f1(c), f1(b), rustFloat((c-b)/b*100, 1, true))
	}
	return strings.Join([]string{
		"Comparison",
		"==========",
		"                    Current     Baseline    Change",
		row("Throughput (rps):   ", cur.Summary.RequestsPerSecond, base.Summary.RequestsPerSecond),
		row("Latency p50 (ms):   ", cur.Summary.LatencyP50Ms, base.Summary.LatencyP50Ms),
		row("Latency p99 (ms):   ", cur.Summary.LatencyP99Ms, base.Summary.LatencyP99Ms),
	}, "\n")
}
