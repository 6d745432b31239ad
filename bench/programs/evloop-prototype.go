//go:build ignore

// Prototype (not part of loadproof): an epoll event loop over raw sockets sending one fixed
// HTTP/1.1 request per connection at a time, to measure what the Go runtime's per-request
// scheduling costs the generator. Minimal response handling: Content-Length only.
package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"
)

var etFlag = func() int64 {
	if os.Getenv("ET") == "1" {
		return 1 << 31
	}
	return 0
}()

type conn struct {
	fd  int
	buf []byte
	n   int
}

func main() {
	addr, reqFile := os.Args[1], os.Args[2]
	nconn, _ := strconv.Atoi(os.Args[3])
	dur, _ := time.ParseDuration(os.Args[4])
	req, err := os.ReadFile(reqFile)
	if err != nil {
		panic(err)
	}
	ta, err := net.ResolveTCPAddr("tcp4", addr)
	if err != nil {
		panic(err)
	}
	var sa syscall.SockaddrInet4
	copy(sa.Addr[:], ta.IP.To4())
	sa.Port = ta.Port
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		panic(err)
	}
	conns := map[int32]*conn{}
	for i := 0; i < nconn; i++ {
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			panic(err)
		}
		if err := syscall.Connect(fd, &sa); err != nil {
			panic(err)
		}
		syscall.SetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_NODELAY, 1)
		syscall.SetNonblock(fd, true)
		c := &conn{fd: fd, buf: make([]byte, 4096)}
		conns[int32(fd)] = c
		ev := syscall.EpollEvent{Events: syscall.EPOLLIN | (uint32(etFlag) & 0x80000000), Fd: int32(fd)}
		if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
			panic(err)
		}
		if _, err := syscall.Write(fd, req); err != nil {
			panic(err)
		}
	}
	events := make([]syscall.EpollEvent, 128)
	end := time.Now().Add(dur)
	count := 0
	crlf2 := []byte("\r\n\r\n")
	cl := []byte("\ncontent-length:")
	clUpper := []byte("\nContent-Length:")
	for {
		n, err := syscall.EpollWait(epfd, events, 100)
		if err != nil && err != syscall.EINTR {
			panic(err)
		}
		if time.Now().After(end) {
			break
		}
		for i := 0; i < n; i++ {
			c := conns[events[i].Fd]
			m, err := syscall.Read(c.fd, c.buf[c.n:])
			if err != nil || m <= 0 {
				if err == syscall.EAGAIN {
					continue
				}
				panic(fmt.Sprint("read ", m, err))
			}
			c.n += m
			h := bytes.Index(c.buf[:c.n], crlf2)
			if h < 0 {
				continue
			}
			head := c.buf[:h]
			k := bytes.Index(head, cl)
			if k < 0 {
				if k = bytes.Index(head, clUpper); k < 0 {
					panic("no content-length")
				}
			}
			v := head[k+len(cl):]
			if e := bytes.IndexByte(v, '\r'); e >= 0 {
				v = v[:e]
			}
			length, _ := strconv.Atoi(string(bytes.TrimSpace(v)))
			if c.n < h+4+length {
				continue
			}
			if !bytes.HasPrefix(c.buf, []byte("HTTP/1.1 200")) {
				panic("status")
			}
			count++
			c.n = copy(c.buf, c.buf[h+4+length:c.n])
			if _, err := syscall.Write(c.fd, req); err != nil {
				panic(err)
			}
		}
	}
	fmt.Println("requests", count)
}
