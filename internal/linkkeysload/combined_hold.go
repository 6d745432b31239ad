package linkkeysload

import (
	"context"
	"crypto/tls"
	"net"
	"syscall"
	"time"

	"github.com/loadproof/loadproof/internal/engine"
	"github.com/loadproof/loadproof/internal/linkkeysresult"
)

// counterLost is the held stream's interval counter of the connections found closed by the server
// while held ("held/lost" in the combined timeline).
const counterLost = "lost"

// holdAndWatch holds the established population until the run's other streams have ended
// (w.OthersDone; at once when w is nil) and at least minHold has passed, or ctx ends, checking every
// second which connections the server closed, each counted (driver counter lostCtr) in the interval
// it was found in, and returns the survival.
func holdAndWatch(ctx context.Context, w *engine.Worker, held []net.Conn, minHold time.Duration, lostCtr int) *linkkeysresult.Survival {
	began := time.Now()
	lost := make([]bool, len(held))
	scan := func() {
		var n int64
		for j, c := range held {
			if lost[j] || isEstablished(c) {
				continue
			}
			lost[j] = true
			n++
		}
		if n > 0 && w != nil {
			w.Add(lostCtr, n)
		}
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	minimum := time.NewTimer(minHold)
	defer minimum.Stop()
	var others <-chan struct{}
	if w != nil {
		others = w.OthersDone()
	}
	held0 := minimum.C
wait:
	for others != nil || held0 != nil {
		select {
		case <-ctx.Done():
			break wait
		case <-others:
			others = nil
		case <-held0:
			held0 = nil
		case <-tick.C:
			scan()
		}
	}
	scan()
	s := &linkkeysresult.Survival{Established: int64(len(held)), LostBy: map[string]int64{}, HeldSecs: time.Since(began).Seconds()}
	for j, c := range held {
		if !lost[j] {
			s.StillOpen++
			continue
		}
		s.LostBy[howClosed(c)]++
	}
	return s
}

// isEstablished reports whether the connection's socket is still established (TCP state); where
// the state cannot be read it counts as established.
func isEstablished(c net.Conn) bool {
	sc, ok := socketOf(c).(syscall.Conn)
	if !ok {
		return true
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	est := true
	_ = raw.Control(func(fd uintptr) {
		if e, known := tcpEstablished(fd); known {
			est = e
		}
	})
	return est
}

// howClosed reads from a connection the server closed to see how it ended: "EOF" (a FIN, or a TLS
// close_notify), "ECONNRESET", "alert_…", or "data" when the server had sent something first. On
// a bare socket (no TLS state) the records cannot be read: only the end of stream or the error.
func howClosed(c net.Conn) string {
	if _, ok := c.(*tls.Conn); !ok {
		return howSocketClosed(c)
	}
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	var b [1]byte
	_, err := c.Read(b[:])
	if err == nil {
		return "data"
	}
	return Detail(err)
}

// howSocketClosed drains what a bare socket still holds (records it cannot decrypt) and names how
// the stream ended: "EOF" or the error's cause.
func howSocketClosed(c net.Conn) string {
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	var b [512]byte
	for {
		if _, err := c.Read(b[:]); err != nil {
			return Detail(err)
		}
	}
}
