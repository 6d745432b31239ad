package linkkeysresult

import (
	"maps"
	"testing"
)

// TestRefusalsAttributeNoMoreThanTheClientSaw: a handshake-bench's refusals are the server's sheds,
// reason by reason, capped at the attempts the client saw end as a shed one does (EOF, reset,
// broken pipe at the handshake); other failures are never taken for refusals.
func TestRefusalsAttributeNoMoreThanTheClientSaw(t *testing.T) {
	delta := Deltas{ShedConnectionLimit: 3, ShedPerSource: 50, ShedOverflow: 7, ShedGlobal: 5}
	for _, c := range []struct {
		name    string
		reasons map[string]int64
		want    map[string]int64
	}{
		{"all seen", map[string]int64{ClassTLS + ":EOF": 40, ClassTLS + ":ECONNRESET": 25},
			map[string]int64{RefusedConnectionLimit: 3, RefusedHandshakeSource: 50, RefusedHandshakeOverflow: 7, RefusedHandshakeGlobal: 5}},
		{"more seen than shed", map[string]int64{ClassTLS + ":EOF": 400},
			map[string]int64{RefusedConnectionLimit: 3, RefusedHandshakeSource: 50, RefusedHandshakeOverflow: 7, RefusedHandshakeGlobal: 5}},
		{"fewer seen: capped in the server's order", map[string]int64{ClassTLS + ":EPIPE": 10, ClassTLS + ":ECONNRESET": 45},
			map[string]int64{RefusedConnectionLimit: 3, RefusedHandshakeSource: 50, RefusedHandshakeOverflow: 2}},
		{"other failures are not refusals", map[string]int64{ClassTLS + ":fingerprint_mismatch": 100, ClassConnect + ":ECONNREFUSED": 5, ClassTimeout: 9}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := NewAttempts()
			maps.Copy(a.Reasons, c.reasons)
			r := &Result{Attempts: a, Server: &ServerAccounting{Delta: delta}}
			r.Command = CmdHandshakeBench
			if got := r.Refusals(); !maps.Equal(got, c.want) {
				t.Fatalf("refused %v, want %v", got, c.want)
			}
		})
	}
	// Without the server's accounting nothing is refused: the client cannot tell a shed from a failure.
	a := NewAttempts()
	a.Reasons[ClassTLS+":EOF"] = 10
	r := &Result{Attempts: a}
	r.Command = CmdHandshakeBench
	if got := r.Refusals(); got != nil {
		t.Fatalf("refused %v without the server's accounting", got)
	}
}
