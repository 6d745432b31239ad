package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/hist"
	lkr "github.com/loadproof/loadproof/internal/linkkeysresult"
	"github.com/loadproof/loadproof/internal/machine"
	"github.com/loadproof/loadproof/internal/result"
)

func TestLinkKeysNotesAreOurOwnWords(t *testing.T) {
	// The seed's sentences must not be reproduced verbatim; spot-check distinctive phrases.
	for _, phrase := range []string{
		"does not by itself distinguish",
		"rejecting requests, not only network failures",
		"This client cannot distinguish 'handshake rate limiter denied it'",
	} {
		for _, note := range []string{NoteLinkKeysConnections, NoteLinkKeysRequestErrors, NoteLinkKeysDDoS} {
			if strings.Contains(note, phrase) {
				t.Errorf("note copies the seed's phrase %q", phrase)
			}
		}
	}
}

func TestLinkKeysTextFromTheFileAlone(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	a := lkr.NewAttempts()
	a.Add("", "", 2*time.Millisecond)
	a.Add(lkr.ClassTLS, lkr.ClassTLS+":EOF", 0)
	r := &lkr.Result{Attempts: a}
	r.Command, r.Target, r.IntervalSecs = lkr.CmdDDoS, "127.0.0.1:4000", 1
	r.Flags = map[string]string{"sources": "2", "concurrency": "1", "client-ip-base": "127.5.0.0"}
	r.StartedAt, r.EndedAt = t0, t0.Add(1270*time.Millisecond)
	r.Machines = []machine.Record{{CPUModel: "cpu", Cores: 2, GoVersion: "go1.26.8", LoadproofVersion: "devel"}}
	h := hist.New()
	h.Record(time.Millisecond)
	r.Intervals = []result.Interval{{T: 0, Secs: 1, Counts: map[string]int64{"success": 1}, Server: map[string]float64{"process_rss_bytes": 100}},
		{T: 1, Secs: 0.27, Counts: map[string]int64{lkr.ClassTLS: 1}, Server: map[string]float64{"process_rss_bytes": 300}}}
	r.Finish()
	var b bytes.Buffer
	if err := LinkKeysText(&b, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"ddos: sources=2 concurrency=1 (one connection attempt per distinct source address)\n",
		"ddos: DONE in 1.27s \u2014 sources=2 client-observed-allowed=1 client-observed-denied=1\n",
		"  denial reasons: {\"tls_handshake_error_or_server_reject:EOF\": 1}\n",
		"  timeline: 2 intervals of 1s, busiest 3.7 operations/sec; server samples in 2, process_rss_bytes 100..300\n",
		"machine: cpu, 2 cores, kernel , nofile 0/0, go1.26.8, loadproof devel; segments 1, machine records 1\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
	r.Command = "nope"
	if err := LinkKeysText(&b, r); err == nil {
		t.Fatal("unknown command reported")
	}
}
