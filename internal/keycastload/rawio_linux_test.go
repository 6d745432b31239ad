package keycastload

import (
	"net"
	"testing"

	"github.com/loadproof/loadproof/internal/testwait"
)

// BenchmarkIdleCheck is the cost of conn.send's check of a pooled connection (peekIdle on an idle,
// live loopback socket), the reason it is skipped for connections reused at once:
//
//	go test -run '^$' -bench IdleCheck ./internal/keycastload/
func BenchmarkIdleCheck(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Read(make([]byte, 1))
			c.Close()
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	sc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if closed, data := peekIdle(sc); closed || data {
			b.Fatal("a live, idle connection looked closed or busy")
		}
	}
}

func TestPeekIdleSeesTheServersClose(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc, _ := c.(*net.TCPConn).SyscallConn()
	s := testwait.Recv(t, accepted, testwait.Long, "the server side's accept")
	if closed, data := peekIdle(sc); closed || data {
		t.Fatalf("open and idle: closed=%v data=%v", closed, data)
	}
	s.Write([]byte("x"))
	buf := make([]byte, 1)
	testwait.Eventually(t, testwait.Long, "the server's byte seen by peekIdle", func() bool {
		_, data := peekIdle(sc)
		return data
	})
	c.Read(buf) // consume it: a peek leaves it there
	s.Close()
	testwait.Eventually(t, testwait.Long, "the server's close seen by peekIdle", func() bool {
		closed, _ := peekIdle(sc)
		return closed
	})
}
