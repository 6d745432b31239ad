//go:build unix

package linkkeysserver

import (
	"context"
	"net"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestListenAcceptsWithoutKeepAlive: accepted sockets carry no SO_KEEPALIVE, as upstream's
// (Go's listener would otherwise probe every idle connection every 15 s).
func TestListenAcceptsWithoutKeepAlive(t *testing.T) {
	ln, _, err := Listen(context.Background(), "127.0.0.1:0", ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	raw, err := sc.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var on int
	var gerr error
	if err := raw.Control(func(fd uintptr) { on, gerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_KEEPALIVE) }); err != nil {
		t.Fatal(err)
	}
	if gerr != nil {
		t.Fatal(gerr)
	}
	if on != 0 {
		t.Fatalf("SO_KEEPALIVE = %d on an accepted socket, want 0", on)
	}
}
