//go:build unix

package linkkeysserver

import (
	"context"
	"net"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/loadproof/loadproof/internal/testwait"
)

// Accepted sockets are set up as upstream's: TCP_NODELAY on, SO_KEEPALIVE off.
func TestListenAcceptedSocketOptions(t *testing.T) {
	ln, _, err := Listen(context.Background(), "127.0.0.1:0", ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dialed := make(chan error, 1)
	go func() {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err == nil {
			defer c.Close()
			var b [1]byte
			_, _ = c.Read(b[:]) // until the server side closes
		}
		dialed <- err
	}()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var keepAlive, noDelay int
	var kerr, nerr error
	if err := rc.Control(func(fd uintptr) {
		keepAlive, kerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_KEEPALIVE)
		noDelay, nerr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NODELAY)
	}); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	if err := testwait.Recv(t, dialed, testwait.Long, "the dialer's end after the close"); err != nil {
		t.Fatal(err)
	}
	if kerr != nil || nerr != nil {
		t.Fatalf("getsockopt: %v, %v", kerr, nerr)
	}
	if keepAlive != 0 || noDelay == 0 {
		t.Errorf("accepted socket: SO_KEEPALIVE %d (want 0, as upstream), TCP_NODELAY %d (want on)", keepAlive, noDelay)
	}
}
