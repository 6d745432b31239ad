package linkkeysserver

import (
	"context"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSteerReusePort checks the kernel behaviour the sequential fill relies on: with a port held by
// a bound, never-listening reservation (as the parent holds it), listeners join the group in the
// order they listen, a steering program sends every new connection to the listener it names, and
// SpreadIndex spreads them again.
func TestSteerReusePort(t *testing.T) {
	res, err := ReservePort("127.0.0.1", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Release()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(res.Port))
	const n = 3
	lns := make([]*net.TCPListener, n)
	for i := range lns {
		ln, _, err := Listen(context.Background(), addr, ListenOptions{ReusePort: true})
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		lns[i] = ln
	}
	var counts [n]atomic.Int64
	for i, ln := range lns {
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
				counts[i].Add(1)
			}
		}()
	}
	// accepted dials and returns how many of the new connections each listener accepted.
	accepted := func(dials int) [n]int {
		t.Helper()
		var before [n]int64
		for i := range counts {
			before[i] = counts[i].Load()
		}
		for range dials {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			var got [n]int
			total := 0
			for i := range counts {
				got[i] = int(counts[i].Load() - before[i])
				total += got[i]
			}
			if total == dials {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("accepted %v of %d connections within 5 s", got, dials)
			}
			time.Sleep(time.Millisecond)
		}
	}
	for _, want := range []int{1, 2, 0} {
		if err := SteerReusePort(lns[(want+1)%n], want); err != nil { // any member steers the group
			t.Fatal(err)
		}
		if got := accepted(30); got[want] != 30 {
			t.Errorf("steered to listener %d: accepted per listener %v", want, got)
		}
	}
	if err := SteerReusePort(lns[0], SpreadIndex); err != nil {
		t.Fatal(err)
	}
	got := accepted(90) // distinct source ports hash apart: every listener gets some
	for i, g := range got {
		if g == 0 {
			t.Errorf("spread again: listener %d got none of 90 (%v)", i, got)
		}
	}
}

// The listener is plain TCP, as upstream's: Go's default since 1.24 would be Multipath TCP where
// the kernel has it, and a SO_REUSEPORT group of MPTCP sockets refuses a steering program.
func TestListenIsPlainTCP(t *testing.T) {
	for _, reuse := range []bool{false, true} {
		ln, _, err := Listen(context.Background(), "127.0.0.1:0", ListenOptions{ReusePort: reuse})
		if err != nil {
			t.Fatal(err)
		}
		rc, err := ln.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var proto int
		var perr error
		_ = rc.Control(func(fd uintptr) { proto, perr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PROTOCOL) })
		ln.Close()
		if perr != nil {
			t.Fatal(perr)
		}
		if proto != unix.IPPROTO_TCP {
			t.Errorf("ReusePort %v: listener protocol %d, want IPPROTO_TCP (%d)", reuse, proto, unix.IPPROTO_TCP)
		}
	}
}
