package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/loadproof/loadproof/internal/linkkeys"
	lkr "github.com/loadproof/loadproof/internal/linkkeysresult"
)

// The accounting block shows the server host's TCP counters over the run when both readings carry
// them, and nothing about them when either lacks them (an upstream or older server).
func TestLinkKeysAccountingHostTCP(t *testing.T) {
	before, after := linkkeys.MetricsLine{Label: "running"}, linkkeys.MetricsLine{Label: "final"}
	before.HostTCPRetransSegs, before.HostTCPListenOverflows = 40, 1
	after.HostTCPRetransSegs, after.HostTCPListenOverflows, after.HostTCPSyncookiesSent = 52, 4, 2
	var b bytes.Buffer
	LinkKeysAccounting(&b, &lkr.ServerAccounting{Source: "log", Before: before, After: after})
	want := "server host TCP (its network namespace, every socket there; deltas over the run): listen_overflows=3 listen_drops=0 retrans_segs=12 dsack_recv=0 syncookies_sent=2\n"
	if !strings.Contains(b.String(), want) {
		t.Errorf("got\n%s\nwant a line\n%s", b.String(), want)
	}
	b.Reset()
	LinkKeysAccounting(&b, &lkr.ServerAccounting{Source: "log", Before: linkkeys.WithoutAppended(before), After: after})
	if strings.Contains(b.String(), "host TCP") {
		t.Errorf("host counters shown although the before reading lacks them:\n%s", b.String())
	}
}
