package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/loadproof/loadproof/internal/machine"
)

// HostLines renders, one line each, the kernel counters every host recorded over its run (machine
// records with a run), then the generator-limited verdict when any host saturated: the figures of
// such a run measure the load generator as much as the server. Empty when no record has a run.
func HostLines(ms []machine.Record) []string {
	var lines []string
	for i, m := range ms {
		if m.Run == nil {
			continue
		}
		name := m.Hostname
		if m.Run.Netns != "" {
			name += " " + m.Run.Netns
		}
		lines = append(lines, fmt.Sprintf("  host %d (%s): %s", i+1, strings.TrimSpace(name), m.Run.Summary()))
	}
	if limited, reasons := machine.GeneratorLimited(ms); limited {
		lines = append(lines, "  GENERATOR-LIMITED: the load generator saturated, so these figures understate the server: "+strings.Join(reasons, "; "))
	}
	return lines
}

// writeHosts prints HostLines.
func writeHosts(w io.Writer, ms []machine.Record) {
	for _, l := range HostLines(ms) {
		fmt.Fprintln(w, l)
	}
}

// validityExtra is the HTML report's rows for the same: whether the generator saturated (always,
// once any host measured its run) and each host's counters.
func validityExtra(ms []machine.Record) [][2]string {
	var rows [][2]string
	measured := false
	for i, m := range ms {
		if m.Run == nil {
			continue
		}
		measured = true
		rows = append(rows, [2]string{fmt.Sprintf("Host %d counters (%s)", i+1, strings.TrimSpace(m.Hostname+" "+m.Run.Netns)), m.Run.Summary()})
	}
	if !measured {
		return nil
	}
	verdict := "no: no host's CPU, schedule or own TCP counters saturated"
	if limited, reasons := machine.GeneratorLimited(ms); limited {
		verdict = "YES: " + strings.Join(reasons, "; ")
	}
	return append([][2]string{{"Generator-limited", verdict}}, rows...)
}
