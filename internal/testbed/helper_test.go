//go:build e2e

package testbed_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/linkkeys"
	"github.com/loadproof/loadproof/internal/machine"
)

// TestMain lets the test binary serve as a small program inside the hosts (helper modes below),
// so the bed's own tests need no binary beside the one under test.
func TestMain(m *testing.M) {
	if mode := os.Getenv("LP_TESTBED_HELPER"); mode != "" {
		if err := helper(mode, os.Args[len(os.Args)-1]); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func helper(mode, arg string) error {
	switch mode {
	case "echo-remote": // accept connections on arg, write each one's remote address, until killed
		ln, err := net.Listen("tcp", arg)
		if err != nil {
			return err
		}
		fmt.Println("listening")
		for {
			c, err := ln.Accept()
			if err != nil {
				return err
			}
			fmt.Fprintf(c, "%s\n", c.RemoteAddr())
			c.Close()
		}
	case "dial-from": // arg "SRC>DST": dial DST from SRC, print what the server says
		src, dst, ok := strings.Cut(arg, ">")
		if !ok {
			return fmt.Errorf("dial-from wants SRC>DST, got %q", arg)
		}
		d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
		c, err := d.Dial("tcp", dst)
		if err != nil {
			return err
		}
		defer c.Close()
		buf := make([]byte, 100)
		n, _ := c.Read(buf)
		fmt.Print(string(buf[:n]))
		return nil
	case "tls-dial": // arg "ADDR|INFOFILE[|FINGERPRINT]": a TLS handshake pinned to the info file's fingerprint
		return tlsDial(arg)
	case "kernel": // print this host's kernel counters (machine.ReadKernel) as JSON
		return json.NewEncoder(os.Stdout).Encode(machine.ReadKernel())
	case "http-get": // arg "URL[|CAFILE]": GET URL (trusting CAFILE for https), print the body
		return httpGet(arg)
	case "overflow": // a listener with a backlog of 0 that never accepts, arg connects; print the kernel delta
		return overflow(arg)
	}
	return fmt.Errorf("unknown helper mode %q", mode)
}

// overflow provokes listen overflows: a listening socket whose backlog holds one connection, never
// accepted, and n connects at once, each bounded by a short timeout.
func overflow(arg string) error {
	var n int
	if _, err := fmt.Sscanf(arg, "%d", &n); err != nil || n < 1 || n > 1000 {
		return fmt.Errorf("overflow wants a count of 1 to 1000, got %q", arg)
	}
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return err
	}
	if err := syscall.Listen(fd, 0); err != nil {
		return err
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		return err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	before := machine.ReadKernel()
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if c, err := net.DialTimeout("tcp", addr, 1500*time.Millisecond); err == nil {
				time.Sleep(200 * time.Millisecond)
				c.Close()
			}
		}()
	}
	wg.Wait()
	rs := machine.Judge(machine.Delta(before, machine.ReadKernel(), 1))
	return json.NewEncoder(os.Stdout).Encode(rs)
}

// tlsDial dials a LinkKeys server with the info file's domain and fingerprint pin (or the pin
// given third), completes the TLS handshake and prints its version.
func tlsDial(arg string) error {
	parts := strings.Split(arg, "|")
	if len(parts) < 2 {
		return fmt.Errorf("tls-dial wants ADDR|INFOFILE[|FINGERPRINT], got %q", arg)
	}
	info, err := linkkeys.ReadInfo(parts[1])
	if err != nil {
		return err
	}
	pin := info.Fingerprint
	if len(parts) > 2 {
		pin = parts[2]
	}
	d := &net.Dialer{Timeout: 5 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", parts[0], linkkeys.ClientTLSConfig(info.Domain, pin))
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Printf("handshake ok %s from %s\n", tls.VersionName(c.ConnectionState().Version), c.LocalAddr())
	return nil
}

// httpGet GETs a URL from inside a host, trusting the CA file given after "|" for https, and prints
// the body of a 200 answer (at most 1 MiB).
func httpGet(arg string) error {
	url, caFile, _ := strings.Cut(arg, "|")
	tr := &http.Transport{}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("%s holds no PEM certificate", caFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: HTTP %d: %s", url, resp.StatusCode, body)
	}
	_, err = os.Stdout.Write(body)
	return err
}
