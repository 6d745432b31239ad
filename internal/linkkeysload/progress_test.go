package linkkeysload

import (
	"bytes"
	"strings"
	"testing"
)

func TestWorkerProgressLines(t *testing.T) {
	var b bytes.Buffer
	p := &workerProgress{w: &b, total: 3}
	p.Update(1, 1, 0)
	p.Update(2, 1, 1)
	p.Update(3, 2, 1)
	var sums bytes.Buffer
	agg := newAggregate(&SeedProgress{W: &sums, Every: 1, OKName: "success", NoName: "failed"})
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if !agg.line(0, line) {
			t.Fatalf("line %q not taken", line)
		}
	}
	// A second worker's lines add to the first's.
	agg.line(1, workerLinePrefix+"progress 1 0 1")
	want := "  progress: attempted=1 success=1 failed=0\n  progress: attempted=2 success=1 failed=1\n" +
		"  progress: attempted=3 success=2 failed=1\n  progress: attempted=4 success=2 failed=2\n"
	if sums.String() != want {
		t.Fatalf("got\n%s", sums.String())
	}
	// Stale (out of order) lines never move the totals back.
	agg.line(0, workerLinePrefix+"progress 2 1 1")
	if sums.String() != want {
		t.Fatal("totals moved back")
	}
}

func FuzzParseWorkerProgress(f *testing.F) {
	f.Add(workerLinePrefix + "progress 3 2 1")
	f.Add(workerLinePrefix + "progress -1 0 0")
	f.Add("progress 1 1 0")
	f.Add(workerLinePrefix + "progress 1 1 1")
	f.Fuzz(func(t *testing.T, line string) {
		a, ok, failed, valid := parseWorkerProgress(line)
		if valid && (a < 0 || ok < 0 || failed < 0 || ok+failed != a) {
			t.Fatalf("inconsistent totals accepted from %q", line)
		}
	})
}
