package keycastserver

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
)

// fastSock is how the fast path reads and writes a connection. On a plain TCP connection
// (rawSocketIO) it calls read(2) and write(2) inside the runtime poller's RawConn.Read and
// RawConn.Write, so waiting, deadlines and closing behave exactly as on net.Conn, without the
// system-call bookkeeping net.Conn's reads and writes add; on anything else it is the
// connection's own Read and Write.
type fastSock struct {
	c  net.Conn
	rc syscall.RawConn // nil: through c

	// The callbacks, bound once so that a read or write allocates nothing, and their operands.
	readFn, writeFn func(uintptr) bool
	buf             []byte
	n               int
	errno           syscall.Errno

	// filled: the last read filled the space it was given, so the socket may hold more.
	// nowait: a read that would wait returns errWouldBlock instead (topUp).
	filled, nowait bool
}

// errWouldBlock is a nowait read's answer when the socket holds nothing.
var errWouldBlock = errors.New("keycastserver: nothing to read yet")

func newFastSock(c net.Conn) *fastSock {
	s := &fastSock{c: c}
	if !rawSocketIO {
		return s
	}
	inner := c
	if cc, ok := c.(*countedConn); ok {
		inner = cc.Conn
	}
	tc, ok := inner.(*net.TCPConn)
	if !ok {
		return s
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return s
	}
	s.rc = rc
	s.readFn, s.writeFn = s.doRead, s.doWrite
	return s
}

func (s *fastSock) Read(p []byte) (int, error) {
	if s.rc == nil {
		return s.c.Read(p)
	}
	s.buf, s.n, s.errno, s.filled = p, 0, 0, false
	err := s.rc.Read(s.readFn)
	s.buf = nil
	switch {
	case err != nil:
		return 0, err
	case s.errno == syscall.EAGAIN: // only when nowait
		return 0, errWouldBlock
	case s.errno != 0:
		return 0, os.NewSyscallError("read", s.errno)
	case s.n == 0 && len(p) > 0:
		return 0, io.EOF
	}
	s.filled = s.n == len(p)
	return s.n, nil
}

func (s *fastSock) doRead(fd uintptr) bool {
	for {
		s.n, s.errno = rawRead(fd, s.buf)
		if s.errno != syscall.EINTR {
			return s.errno != syscall.EAGAIN || s.nowait // EAGAIN: wait for readability
		}
	}
}

// topUp reads, without waiting, what the socket already holds after br's buffered bytes, when
// the last read filled the buffer: a client that pipelines requests has most likely sent more,
// and reading it before writing lets the answers held back leave with the next ones in one
// write instead of one write per buffer-full (each write to loopback runs the client's receive
// path and may wake it). A request per write never fills the buffer, so it never pays for the
// extra read. topUp may move the buffered bytes: anything aliasing br's buffer is stale after
// it. It reports whether it read anything; a read error other than "nothing yet" is left for
// the next (waiting) read to meet again.
func (s *fastSock) topUp(br *bufio.Reader) bool {
	n := br.Buffered()
	if !s.filled || s.rc == nil || n >= br.Size() {
		return false
	}
	s.nowait = true
	_, err := br.Peek(n + 1)
	s.nowait = false
	return err == nil
}

func (s *fastSock) Write(p []byte) (int, error) {
	if s.rc == nil {
		return s.c.Write(p)
	}
	s.buf, s.n, s.errno = p, 0, 0
	err := s.rc.Write(s.writeFn)
	s.buf = nil
	switch {
	case err != nil:
		return s.n, err
	case s.errno != 0:
		return s.n, os.NewSyscallError("write", s.errno)
	}
	return s.n, nil
}

func (s *fastSock) doWrite(fd uintptr) bool {
	for s.n < len(s.buf) {
		w, e := rawWrite(fd, s.buf[s.n:])
		switch e {
		case 0:
			s.n += w
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false // the send buffer is full: wait for writability
		default:
			s.errno = e
			return true
		}
	}
	return true
}
