package linkkeysload

import (
	"context"
	"fmt"
	"time"
)

// PreflightTimeout bounds the one connection a client makes before its run.
const PreflightTimeout = 2 * time.Second

// Preflight connects to the target once from source address src and completes a pinned TLS
// handshake, so that a dead server, a wrong fingerprint or a port that does not speak TLS fails the
// command at once with its likely cause, instead of as a run of thousands of identical failures.
// A handshake the server's limiter turns away (the stream closes during the handshake) is not a
// preflight failure: the limiter is part of what a run measures.
func Preflight(ctx context.Context, t Target, src IPv4) error {
	d := Dialer{Target: t, Timeout: PreflightTimeout}
	conn, f := d.Dial(ctx, src, nil)
	if f.Stage == StageNone {
		closeConn(conn)
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	stale := ""
	if t.PID > 0 {
		stale = fmt.Sprintf(" (the info file names server pid %d: is that process still running?)", t.PID)
	}
	switch {
	case f.Stage == StageTimeout:
		return fmt.Errorf("no TLS handshake with %s within %s: the host does not answer (a firewall, a wrong --target or a stale info file%s)", t.Addr, PreflightTimeout, stale)
	case f.Detail == "ECONNREFUSED":
		return fmt.Errorf("nothing listens on %s (connection refused): the server is down or the info file is stale%s", t.Addr, stale)
	case f.Detail == "fingerprint_mismatch":
		return fmt.Errorf("the server on %s presents a certificate whose fingerprint is not %s: the info file is stale (a restarted server makes a new certificate) or --fingerprint is wrong", t.Addr, t.Fingerprint)
	case f.Detail == "not_tls":
		return fmt.Errorf("%s does not speak TLS (an HTTP or metrics port?): give the LinkKeys listener's port", t.Addr)
	case f.Detail == "EOF" || f.Detail == "ECONNRESET":
		return nil // the server's limiter closes a refused handshake this way; the run will say so
	case f.Stage == StageConnect:
		return fmt.Errorf("cannot connect to %s from %s: %v", t.Addr, src.Addr(), f)
	}
	return fmt.Errorf("TLS handshake with %s failed: %v", t.Addr, f)
}
