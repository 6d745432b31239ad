package linkkeysserver

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestRaiseAndReportFDLimitWeighsEachProcessShare: a multi-process server
// warns about the open-file limit only when one process's share of
// TCP_MAX_CONNECTIONS does not fit under it (each child holds only its
// share), and a one-process server when the whole cap does not.
func TestRaiseAndReportFDLimitWeighsEachProcessShare(t *testing.T) {
	soft := RaiseAndReportFDLimit(slog.New(slog.DiscardHandler), 0, 1)
	if soft == 0 {
		t.Skip("RLIMIT_NOFILE unreadable here")
	}
	max := 10 * soft
	for _, tc := range []struct {
		processes int
		warn      string
	}{
		{1, "TCP_MAX_CONNECTIONS + 256 exceeds"},
		{5, "each server process's share"}, // 2 x soft each
		{20, ""},                           // soft/2 each
	} {
		var buf bytes.Buffer
		RaiseAndReportFDLimit(slog.New(slog.NewTextHandler(&buf, nil)), max, tc.processes)
		got := buf.String()
		if tc.warn == "" {
			if strings.Contains(got, "WARN") {
				t.Errorf("%d processes for %d connections under a soft limit of %d: unexpected warning\n%s", tc.processes, max, soft, got)
			}
		} else if !strings.Contains(got, tc.warn) {
			t.Errorf("%d processes for %d connections under a soft limit of %d: want a warning containing %q, got\n%s", tc.processes, max, soft, tc.warn, got)
		}
	}
}
