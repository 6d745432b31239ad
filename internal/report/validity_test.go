package report

import (
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/machine"
)

// TestHostLinesGeneratorLimited: a synthetic CPU reading at 95 % of the cores marks the run
// generator-limited in the text lines and the HTML rows; a calm host alone does not.
func TestHostLinesGeneratorLimited(t *testing.T) {
	at := time.Unix(1000, 0)
	reading := func(sec int, cpu time.Duration) machine.Kernel {
		return machine.Kernel{At: at.Add(time.Duration(sec) * time.Second), ProcessCPU: cpu, ConntrackCount: -1, ConntrackMax: -1}
	}
	busy := machine.Judge(machine.Delta(reading(0, 0), reading(10, 19*time.Second), 2))
	calm := machine.Judge(machine.Delta(reading(0, 0), reading(10, 2*time.Second), 2))
	recs := []machine.Record{{Hostname: "load-1", Run: calm}, {Hostname: "load-2", Run: busy}}

	lines := strings.Join(HostLines(recs), "\n")
	for _, want := range []string{"host 1 (load-1): CPU 10% of 2 cores", "host 2 (load-2): CPU 95% of 2 cores", "GENERATOR-LIMITED", "load-2: client CPU 95% of 2 cores"} {
		if !strings.Contains(lines, want) {
			t.Errorf("lines lack %q:\n%s", want, lines)
		}
	}
	rows := validityExtra(recs)
	if len(rows) != 3 || rows[0][0] != "Generator-limited" || !strings.HasPrefix(rows[0][1], "YES: load-2") {
		t.Errorf("HTML rows %q", rows)
	}
	if l := strings.Join(HostLines(recs[:1]), "\n"); strings.Contains(l, "GENERATOR-LIMITED") {
		t.Errorf("a calm host marked limited:\n%s", l)
	}
	if rows := validityExtra(recs[:1]); !strings.HasPrefix(rows[0][1], "no:") {
		t.Errorf("HTML rows for a calm host %q", rows)
	}
	if HostLines([]machine.Record{{Hostname: "old"}}) != nil || validityExtra([]machine.Record{{}}) != nil {
		t.Error("records without a run (older files) should add nothing")
	}
}
