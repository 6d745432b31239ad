package linkkeysload

import (
	"time"

	"github.com/loadproof/loadproof/internal/linkkeysresult"
)

// The result types live in package linkkeysresult, which reports read without importing the
// clients; these aliases keep this package's API.
type (
	// Result is the outcome of one command (or one worker's segment of it).
	Result = linkkeysresult.Result
	// Duration is a time.Duration with its Rust rendering in JSON.
	Duration = linkkeysresult.Duration
	// Attempts counts connection attempts and why they failed.
	Attempts = linkkeysresult.Attempts
	// Hold describes the connections held at once.
	Hold = linkkeysresult.Hold
	// HoldLoss describes the held connections that ended during the hold.
	HoldLoss = linkkeysresult.HoldLoss
	// CPUPer is the CPU of a run per attempt and per success.
	CPUPer = linkkeysresult.CPUPer
	// Handshakes holds handshake-bench's figures.
	Handshakes = linkkeysresult.Handshakes
	// Requests holds request-bench's figures.
	Requests = linkkeysresult.Requests
	// ServerAccounting is the server's own view of a run.
	ServerAccounting = linkkeysresult.ServerAccounting
	// Target is the server a client talks to.
	Target = linkkeysresult.Target
)

// Command names, as in the seed.
const (
	CmdConnections    = linkkeysresult.CmdConnections
	CmdHandshakeBench = linkkeysresult.CmdHandshakeBench
	CmdRequestBench   = linkkeysresult.CmdRequestBench
	CmdDDoS           = linkkeysresult.CmdDDoS
	CmdCombined       = linkkeysresult.CmdCombined
)

func newAttempts() *Attempts { return linkkeysresult.NewAttempts() }

// recordAttempt counts one finished attempt with its failure (StageNone: success).
func recordAttempt(a *Attempts, f Failure, took time.Duration) {
	if f.Stage == StageNone {
		a.Add("", "", took)
		return
	}
	a.Add(f.Stage.Label(), f.Reason(), took)
}

// holdLoss returns the loss of a hold from the count at its end (lost, authoritative) and what the
// watcher saw: the seen reasons, capped at lost, and "unknown" for the rest; nil when nothing was
// lost.
func holdLoss(lost int64, seen HoldLoss) *HoldLoss {
	if lost <= 0 {
		return nil
	}
	l := &HoldLoss{Lost: lost, Reasons: map[string]int64{}, First: seen.First, Last: seen.Last}
	var counted int64
	for _, r := range []string{linkkeysresult.LossClosed, linkkeysresult.LossReset} {
		n := min(seen.Reasons[r], lost-counted)
		if n > 0 {
			l.Reasons[r] = n
			counted += n
		}
	}
	if counted < lost {
		l.Reasons[linkkeysresult.LossUnknown] = lost - counted
	}
	return l
}

// ReadResult reads a result file (linkkeysresult.Read).
func ReadResult(b []byte) (Result, error) { return linkkeysresult.Read(b) }

// Merge combines the results of the segments of one run (linkkeysresult.Merge).
func Merge(parts []Result) (Result, error) { return linkkeysresult.Merge(parts) }
