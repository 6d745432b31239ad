package linkkeysserver

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestRaiseAndReportFDLimitLeavesProcessesToTheChildren: a one-process server
// warns when TCP_MAX_CONNECTIONS + 256 does not fit under its open-file
// limit; the parent of several processes only reports its limit, since each
// child reports its own and the supervisor weighs them (ProcessFDProblem).
func TestRaiseAndReportFDLimitLeavesProcessesToTheChildren(t *testing.T) {
	soft := RaiseAndReportFDLimit(slog.New(slog.DiscardHandler), 0, 1)
	if soft == 0 {
		t.Skip("RLIMIT_NOFILE unreadable here")
	}
	max := 10 * soft
	for _, tc := range []struct {
		processes int
		max       uint64
		warn      string
	}{
		{1, max, "TCP_MAX_CONNECTIONS + 256 exceeds"},
		{1, soft / 2, ""},
		{5, max, ""},
		{20, max, ""},
	} {
		var buf bytes.Buffer
		RaiseAndReportFDLimit(slog.New(slog.NewTextHandler(&buf, nil)), tc.max, tc.processes)
		got := buf.String()
		if !strings.Contains(got, "fd limit") {
			t.Errorf("%d processes: the limit is not reported:\n%s", tc.processes, got)
		}
		if tc.warn == "" {
			if strings.Contains(got, "WARN") {
				t.Errorf("%d processes for %d connections under a soft limit of %d: unexpected warning\n%s", tc.processes, tc.max, soft, got)
			}
		} else if !strings.Contains(got, tc.warn) {
			t.Errorf("%d processes for %d connections under a soft limit of %d: want a warning containing %q, got\n%s", tc.processes, tc.max, soft, tc.warn, got)
		}
	}
}

// TestProcessFDProblem: the server's processes hold at most their usable
// descriptors together (each limit less fdHeadroom); fewer than
// TCP_MAX_CONNECTIONS is reported with the numbers and the processes that
// would fit, and a spread fill also when one process's share exceeds its own.
func TestProcessFDProblem(t *testing.T) {
	for _, tc := range []struct {
		name    string
		max     uint64
		nofiles []uint64
		fill    Fill
		want    []string // substrings; none means no problem
	}{
		{"the issue's 220,000 over two processes of 20,000", 220000, []uint64{20000, 20000}, FillSequential,
			[]string{"TCP_MAX_CONNECTIONS 220000", "soft limit (20000) less 256", "19744 descriptors", "39488 together", "12 processes would fit", "--processes 12"}},
		{"enough together", 30000, []uint64{20000, 20000}, FillSequential, nil},
		{"exactly enough", 2 * 19744, []uint64{20000, 20000}, FillSequential, nil},
		{"one short", 2*19744 + 1, []uint64{20000, 20000}, FillSequential, []string{"39488 together", "3 processes would fit"}},
		{"different limits: the smallest decides the count", 30000, []uint64{20000, 1256}, FillSequential,
			[]string{"(20000, 1256)", "1000 descriptors", "20744 together", "30 processes would fit"}},
		{"limits under the reserve", 1000, []uint64{200, 256}, FillSequential, []string{"0 together", "no number of processes would fit"}},
		{"unknown limit", 1 << 40, []uint64{0, 20000}, FillSequential, nil},
		{"spread: a share beyond its process's descriptors", 25000, []uint64{20000, 10000}, FillSpread,
			[]string{"process 1's share of TCP_MAX_CONNECTIONS 25000 is 12500", "leaves 9744"}},
		{"sequential: the same limits are fine", 29000, []uint64{20000, 10000}, FillSequential, nil},
		{"no processes", 10, nil, FillSequential, nil},
	} {
		got := ProcessFDProblem(tc.max, tc.nofiles, tc.fill)
		if len(tc.want) == 0 {
			if got != "" {
				t.Errorf("%s: unexpected problem %q", tc.name, got)
			}
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q lacks %q", tc.name, got, w)
			}
		}
	}
}
