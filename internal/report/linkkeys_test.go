package report

import (
	"bytes"
	"encoding/json"
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

// TestLinkKeysLostHoldFromTheFile: a connections result whose hold was not held redraws its LOST line,
// and a run's cpu line per attempt and per success, from the result file alone.
func TestLinkKeysLostHoldFromTheFile(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	a := lkr.NewAttempts()
	for range 4 {
		a.Add("", "", time.Millisecond)
	}
	r := lkr.Result{Attempts: a, TargetInfo: lkr.Target{PID: 4242}, ClientCPU: lkr.Duration(2 * time.Millisecond),
		Hold: &lkr.Hold{HoldSecs: 20, Held: 4, StillOpen: 1, Start: t0, Lasted: lkr.Duration(3 * time.Second),
			Loss: &lkr.HoldLoss{Lost: 3, Reasons: map[string]int64{lkr.LossClosed: 2, lkr.LossReset: 1},
				First: t0.Add(1500 * time.Millisecond), Last: t0.Add(2 * time.Second), ServerGone: true}}}
	r.Command, r.Target = lkr.CmdConnections, "127.0.0.1:4000"
	r.Flags = map[string]string{"count": "4", "concurrency": "2", "hold-secs": "20", "client-ip-count": "1", "client-ip-base": "127.0.1.0"}
	r.StartedAt, r.EndedAt = t0.Add(-time.Second), t0.Add(3*time.Second)
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	back, err := lkr.Read(b)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := LinkKeysText(&out, &back); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"  LOST: 3 of 4 held connections ended during the hold ({\"closed_by_server\": 2, \"reset\": 1}), the first 1.5s after it began, the last 2s after it began; the server process (pid 4242) is no longer running; the hold was not held (it lasted 3s of 20s)\n",
		"  cpu: client 2ms (500µs per attempt, 500µs per established connection)\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}
