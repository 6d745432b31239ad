//go:build linux || darwin

package keycastserver_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/keycastserver"
	"github.com/loadproof/loadproof/internal/testwait"
)

// TestFDExhaustion: when the process runs out of file descriptors (the cap set above the
// limit, on purpose), accept keeps working: each waiting connection is answered 503
// admission_rejected through the reserve descriptor instead of waiting in the backlog, the
// trouble is logged once, not once per failed accept, and normal clients are served as soon as
// descriptors are free again. The server runs in a child process whose open-file limit is
// lowered, so the test process keeps its own.
func TestFDExhaustion(t *testing.T) {
	if dir := os.Getenv("KEYCAST_FD_CHILD"); dir != "" {
		fdChild(t, dir)
		return
	}
	if testing.Short() {
		t.Skip("starts a child process")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFDExhaustion$")
	cmd.Env = append(os.Environ(), "KEYCAST_FD_CHILD="+t.TempDir())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var line string
	testwait.Call(t, testwait.Long, "address line from the child", func() { line, err = bufio.NewReader(stdout).ReadString('\n') })
	if err != nil {
		t.Fatalf("child did not start: %v\n%s", err, stderr.String())
	}
	addr := strings.TrimSpace(strings.TrimPrefix(line, "addr "))

	// Hold more connections than the child has descriptors.
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for range 200 {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			break
		}
		held = append(held, c)
	}
	// No wait for the child to catch up: the kernel queues accepted handshakes in order, so every
	// probe below reaches the child's accept loop after the held connections have used up its
	// descriptors.
	probe := func() (int, error) {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			return 0, err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(3 * time.Second))
		fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", addr)
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, res.Body)
		return res.StatusCode, nil
	}
	for i := range 5 {
		if st, err := probe(); st != http.StatusServiceUnavailable {
			t.Errorf("probe %d while out of descriptors: %d %v, want an immediate 503", i, st, err)
		}
	}
	for _, c := range held {
		c.Close()
	}
	held = nil
	ok := false
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if st, _ := probe(); st == http.StatusOK {
			ok = true
			break
		}
	}
	if !ok {
		t.Error("no 200 within 3 s after the descriptors were freed")
	}
	stdin.Close()
	testwait.Call(t, testwait.Long, "child's exit after its stdin closed", func() { err = cmd.Wait() })
	if err != nil {
		t.Errorf("child: %v", err)
	}
	logs := stderr.String()
	if n := strings.Count(logs, "out of file descriptors"); n != 1 {
		t.Errorf("child logged %d lines about accept failures, want exactly one (rate-limited):\n%s", n, logs)
	}
}

// fdChild runs the server with a low open-file limit until stdin closes.
func fdChild(t *testing.T, dir string) {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv, err := keycastserver.New(keycastserver.Config{DataDir: dir, BcryptCost: 4, MaxConnections: 100_000}, logger)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fds, _ := os.ReadDir("/dev/fd")
	lim := syscall.Rlimit{Cur: uint64(len(fds) + 40), Max: uint64(len(fds) + 40)}
	var old syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old)
	lim.Max = old.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	fmt.Printf("addr %s\n", ln.Addr())
	io.Copy(io.Discard, os.Stdin)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(ctx)
	testwait.Recv(t, done, testwait.Long, "Serve's return after Shutdown")
}
