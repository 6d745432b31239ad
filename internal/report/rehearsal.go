package report

import (
	"net"
	"net/url"

	"github.com/loadproof/loadproof/internal/evidence"
	"github.com/loadproof/loadproof/internal/hostrule"
)

// Rehearsal reports whether an evidence bundle's load went to this machine (a loopback target):
// a rehearsal of the plan, never evidence of a deployment, whatever its checks say. A Keycast
// bundle tells by its plan's target URL; a LinkKeys one by its phases' servers (a server the
// command started itself, or one reached on a loopback address).
func Rehearsal(ev *evidence.Evidence) bool {
	if ev.Plan.TargetURL != "" {
		u, err := url.Parse(ev.Plan.TargetURL)
		return err == nil && hostrule.IsLoopback(u.Hostname())
	}
	seen := false
	for _, ph := range ev.Phases {
		if ph.Server == nil {
			continue
		}
		seen = true
		if ph.Server.Target == "" {
			continue // a server the command started on this machine
		}
		host, _, err := net.SplitHostPort(ph.Server.Target)
		if err != nil || !hostrule.IsLoopback(host) {
			return false
		}
	}
	return seen
}
