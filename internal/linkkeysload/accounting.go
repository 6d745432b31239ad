package linkkeysload

import (
	"fmt"
	"io"
	"strings"

	"github.com/loadproof/loadproof/internal/linkkeys"
)

// ServerAccounting is the server's own view of a run: its counters before and after, the deltas,
// and the checks of the client's counts against them.
type ServerAccounting struct {
	Source string               `json:"source"`
	Before linkkeys.MetricsLine `json:"before"`
	After  linkkeys.MetricsLine `json:"after"`
	Delta  Deltas               `json:"delta"`
	Checks []Check              `json:"checks"`
	// Settled is false when no reading without handshakes in progress arrived after the run, so the
	// after reading may miss the last attempts.
	Settled bool `json:"settled"`
	// Note explains a reading that could not be taken or a check that could not be made.
	Note string `json:"note,omitempty"`
}

// Deltas are the server counters' changes over the run.
type Deltas struct {
	Accepted            int64 `json:"accepted_connections"`
	Admitted            int64 `json:"admitted"`
	HandshakesCompleted int64 `json:"handshakes_completed"`
	HasCompleted        bool  `json:"has_handshakes_completed"`
	HandshakeRejections int64 `json:"handshake_rejections"`
	HandshakeTimeouts   int64 `json:"handshake_timeouts"`
	ShedConnectionLimit int64 `json:"shed_connection_limit"`
	ShedPerSource       int64 `json:"shed_handshake_per_source"`
	ShedOverflow        int64 `json:"shed_handshake_overflow"`
	ShedGlobal          int64 `json:"shed_handshake_global"`
}

// Shed is the sum of every shed counter.
func (d Deltas) Shed() int64 {
	return d.ShedConnectionLimit + d.ShedPerSource + d.ShedOverflow + d.ShedGlobal
}

// Check compares one client count with the server's.
type Check struct {
	Name   string `json:"name"`
	Client int64  `json:"client"`
	Server int64  `json:"server"`
	OK     bool   `json:"ok"`
}

func sub(a, b uint64) int64 { return int64(a) - int64(b) }

// NewServerAccounting computes the deltas between two readings and checks them against the client's
// attempts: every attempt must have reached the server (attempts = accepted), and the server must
// account for each one as admitted or shed (attempts = admitted + shed); when the server reports
// completed handshakes, the client's successes must equal them and its failures must equal the
// server's sheds, handshake rejections and timeouts.
func NewServerAccounting(source string, before, after linkkeys.MetricsLine, attempts, succeeded, failed int64, settled bool) *ServerAccounting {
	d := Deltas{
		Accepted:            sub(after.AcceptedConnections, before.AcceptedConnections),
		Admitted:            sub(after.Admitted(), before.Admitted()),
		HandshakeRejections: sub(after.HandshakeRejections, before.HandshakeRejections),
		HandshakeTimeouts:   sub(after.HandshakeTimeouts, before.HandshakeTimeouts),
		ShedConnectionLimit: sub(after.ShedConnectionLimit, before.ShedConnectionLimit),
		ShedPerSource:       sub(after.ShedHandshakePerSource, before.ShedHandshakePerSource),
		ShedOverflow:        sub(after.ShedHandshakeOverflow, before.ShedHandshakeOverflow),
		ShedGlobal:          sub(after.ShedHandshakeGlobal, before.ShedHandshakeGlobal),
	}
	a, aok := after.HandshakesCompleted()
	b, bok := before.HandshakesCompleted()
	if aok && bok {
		d.HandshakesCompleted, d.HasCompleted = sub(a, b), true
	}
	acc := &ServerAccounting{Source: source, Before: before, After: after, Delta: d, Settled: settled}
	check := func(name string, client, server int64) {
		acc.Checks = append(acc.Checks, Check{Name: name, Client: client, Server: server, OK: client == server})
	}
	check("attempts = server accepted_connections", attempts, d.Accepted)
	check("attempts = server admitted + shed", attempts, d.Admitted+d.Shed())
	if d.HasCompleted {
		check("allowed = server handshakes completed", succeeded, d.HandshakesCompleted)
		check("denied = server shed + handshake rejections + timeouts", failed, d.Shed()+d.HandshakeRejections+d.HandshakeTimeouts)
	} else {
		acc.Note = "the server reports no cumulative count of completed handshakes, so allowed and denied are checked only through accepted and admitted"
	}
	return acc
}

// Mismatch reports whether any check failed.
func (a *ServerAccounting) Mismatch() bool {
	for _, c := range a.Checks {
		if !c.OK {
			return true
		}
	}
	return false
}

// WriteAccounting prints the server's accounting next to the client's (the lines after the seed's
// paragraph in ddos and connections).
func WriteAccounting(w io.Writer, a *ServerAccounting) {
	if a == nil {
		return
	}
	d := a.Delta
	rss := "null"
	if a.After.ProcessRSSBytes != nil {
		rss = fmt.Sprint(*a.After.ProcessRSSBytes)
	}
	fmt.Fprintf(w, "  server accounting (METRICS deltas from %s): accepted_connections=%d admitted=%d shed_connection_limit=%d shed_handshake_per_source=%d shed_handshake_overflow=%d shed_handshake_global=%d handshake_rejections=%d handshake_timeouts=%d",
		a.Source, d.Accepted, d.Admitted, d.ShedConnectionLimit, d.ShedPerSource, d.ShedOverflow, d.ShedGlobal, d.HandshakeRejections, d.HandshakeTimeouts)
	if d.HasCompleted {
		fmt.Fprintf(w, " handshakes_completed=%d", d.HandshakesCompleted)
	}
	fmt.Fprintf(w, " open_connections=%d process_rss_bytes=%s\n", a.After.OpenConnections, rss)
	parts := make([]string, len(a.Checks))
	for i, c := range a.Checks {
		verdict := "ok"
		if !c.OK {
			verdict = fmt.Sprintf("MISMATCH (difference %+d)", c.Client-c.Server)
		}
		parts[i] = fmt.Sprintf("%s: %d vs %d %s", c.Name, c.Client, c.Server, verdict)
	}
	fmt.Fprintf(w, "  client vs server: %s\n", strings.Join(parts, "; "))
	if !a.Settled {
		fmt.Fprintln(w, "  WARNING: no server reading without handshakes in progress arrived after the run; the server counts may still be moving.")
	}
	if a.Mismatch() {
		fmt.Fprintln(w, "  WARNING: the server's accounting does not match this client's attempts. Other traffic to the server during the run, attempts that never reached it (see the failure reasons), or a counting fault in the server explain a difference.")
	}
	if a.Note != "" {
		fmt.Fprintf(w, "  note: %s\n", a.Note)
	}
}

// WriteAccountingError prints why the server's accounting could not be read.
func WriteAccountingError(w io.Writer, a *ServerAccounting) {
	fmt.Fprintf(w, "  server accounting unavailable (%s): %s\n", a.Source, a.Note)
}
