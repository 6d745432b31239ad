package report

import (
	"bytes"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	lkr "github.com/loadproof/loadproof/internal/linkkeysresult"
)

// The combined command's lines: a header naming every stream with its source range, then for each
// stream the DONE lines its command prints alone, prefixed with the stream's name, the held
// population's survival, and the server's accounting (the whole run's, then each stream's where the
// server reports counters per source prefix). These are ours: the seed has no combined command.

// LinkKeysCombinedHeader prints the header line; streams are "name=first+count".
func LinkKeysCombinedHeader(w io.Writer, streams []string) {
	w = TextWriter(w)
	fmt.Fprintf(w, "combined: streams %s (each from its own source range, all at once)\n", strings.Join(streams, " "))
}

// LinkKeysCombinedDone prints every stream's lines, the survival and the accounting.
func LinkKeysCombinedDone(w io.Writer, r *lkr.Result) {
	w = TextWriter(w)
	c := r.Combined
	if c == nil {
		return
	}
	for i := range c.Streams {
		s := &c.Streams[i]
		if s.Result == nil {
			continue
		}
		var b bytes.Buffer
		LinkKeysDone(&b, s.Kind, s.Params, s.Result)
		prefix := fmt.Sprintf("  [%s] ", s.Name)
		fmt.Fprintf(w, "%sfrom %gs, sources %s +%d:\n", prefix, s.StartSecs, s.SourceFirst, s.SourceCount)
		for _, line := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
			if strings.HasPrefix(line, NoteLinkKeysConnections) || strings.HasPrefix(line, NoteLinkKeysDDoS) {
				continue // said once below, for every stream
			}
			fmt.Fprintf(w, "%s%s\n", prefix, strings.TrimLeft(line, " "))
		}
		if sv := s.Survival; sv != nil {
			fmt.Fprintf(w, "%ssurvival: %d of %d held connections still established after %.1fs held (%.2f%%); lost %d%s\n",
				prefix, sv.StillOpen, sv.Established, sv.HeldSecs, sv.Percent, sv.Lost, lostBy(sv.LostBy))
			if len(sv.ServerCloses) > 0 {
				fmt.Fprintf(w, "%sserver close counters over the run (all sources): %s\n", prefix, Sanitize(lkr.FormatRustMap(sv.ServerCloses)))
			}
		}
		if ss := s.Server; ss != nil {
			fmt.Fprintf(w, "%sserver, source prefix %s: %s\n", prefix, ss.Prefix, formatDeltas(ss.Delta))
			writeChecks(w, prefix, ss.Checks)
		}
	}
	fmt.Fprintln(w, "  NOTE: the client cannot tell a connection the server's handshake limiter refused from one that failed otherwise; the server's counters are the authoritative breakdown, per stream where the server counts per source prefix.")
	if a := r.Server; a != nil {
		if len(a.Checks) == 0 && a.Note != "" {
			LinkKeysAccountingError(w, a)
		} else {
			fmt.Fprintln(w, "  whole run, every stream's connection attempts together:")
			LinkKeysAccounting(w, a)
		}
		if c.Attribution != "source-prefix" {
			fmt.Fprintln(w, "  note: the server reports no counters per source prefix, so its figures are checked for the whole run only, not per stream.")
		}
	}
	if r.Stop != nil {
		fmt.Fprintf(w, "  stopped early: %s after %.1fs", r.Stop.Reason, r.Stop.ElapsedSecs)
		if r.Stop.Metric != "" {
			fmt.Fprintf(w, " (%s %g against limit %g)", r.Stop.Metric, r.Stop.Observed, r.Stop.Limit)
		}
		fmt.Fprintln(w)
	}
	if r.CPUPerOp() != nil {
		writeCPU(w, r)
	} else if r.ClientCPU > 0 {
		fmt.Fprintf(w, "  cpu: client %s", lkr.FormatRustDuration(time.Duration(r.ClientCPU)))
		if r.ServerCPU != nil {
			fmt.Fprintf(w, ", server %s", lkr.FormatRustDuration(time.Duration(*r.ServerCPU)))
		}
		fmt.Fprintln(w)
	}
}

func lostBy(m map[string]int64) string {
	if len(m) == 0 {
		return ""
	}
	return " (" + formatDeltas(m) + ")"
}

func formatDeltas(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, " ")
}

func writeChecks(w io.Writer, prefix string, checks []lkr.Check) {
	if len(checks) == 0 {
		return
	}
	parts := make([]string, len(checks))
	for i, c := range checks {
		verdict := "ok"
		if !c.OK {
			verdict = fmt.Sprintf("MISMATCH (difference %+d)", c.Client-c.Server)
		}
		parts[i] = fmt.Sprintf("%s: %d vs %d %s", c.Name, c.Client, c.Server, verdict)
	}
	fmt.Fprintf(w, "%sclient vs server: %s\n", prefix, strings.Join(parts, "; "))
}
