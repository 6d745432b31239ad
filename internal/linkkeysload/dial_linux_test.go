package linkkeysload

import (
	"context"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestDialSocketOptions: a dialed connection comes from the source address asked for, has
// TCP_NODELAY on (Go sets it; the dialer does not set it again) and SO_KEEPALIVE off (the seed
// sets none).
func TestDialSocketOptions(t *testing.T) {
	s := newFakeServer(t).start()
	d := &Dialer{Target: s.target, Timeout: 5 * time.Second}
	src, err := ParseIPv4("test", "127.0.9.7")
	if err != nil {
		t.Fatal(err)
	}
	conn, f := d.Dial(context.Background(), src, nil)
	if f.Err != nil {
		t.Fatalf("dial: %v", f)
	}
	defer conn.Close()
	tc := conn.NetConn().(*net.TCPConn)
	if got := tc.LocalAddr().(*net.TCPAddr).AddrPort().Addr(); got != src.Addr() {
		t.Errorf("local address %v, want the source %v", got, src.Addr())
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var nodelay, keepalive int
	var serr error
	if err := rc.Control(func(fd uintptr) {
		if nodelay, serr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NODELAY); serr != nil {
			return
		}
		keepalive, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_KEEPALIVE)
	}); err != nil || serr != nil {
		t.Fatal(err, serr)
	}
	if nodelay == 0 {
		t.Error("TCP_NODELAY is off on a dialed connection")
	}
	if keepalive != 0 {
		t.Error("SO_KEEPALIVE is on on a dialed connection; the seed sets none")
	}
}
