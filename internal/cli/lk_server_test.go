package cli

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/linkkeys"
	"github.com/loadproof/loadproof/internal/linkkeysserver"
	"github.com/loadproof/loadproof/internal/testwait"
)

// lksOutput collects a command's stdout and hands out complete lines.
type lksOutput struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	lines chan string
	part  string
}

func (o *lksOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf.Write(p)
	o.part += string(p)
	for {
		line, rest, ok := strings.Cut(o.part, "\n")
		if !ok {
			break
		}
		o.part = rest
		select {
		case o.lines <- line:
		default:
		}
	}
	return len(p), nil
}

func (o *lksOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

func lksEnv(env map[string]string) (*Env, *lksOutput, *bytes.Buffer) {
	out := &lksOutput{lines: make(chan string, 1000)}
	var errBuf bytes.Buffer
	return &Env{Stdout: out, Stderr: &syncWriter{w: &errBuf}, Getenv: func(k string) string { return env[k] },
		Logger: slog.New(slog.NewTextHandler(&syncWriter{w: &errBuf}, nil))}, out, &errBuf
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func waitLine(t *testing.T, out *lksOutput, prefix string) string {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case l := <-out.lines:
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-timeout:
			t.Fatalf("no line starting %q; output so far:\n%s", prefix, out.String())
		}
	}
}

var listeningRE = regexp.MustCompile(`^listening on 127\.0\.0\.1:(\d+) pid=(\d+) \(info written to (.+)\)$`)

// TestLinkKeysServerCommand runs `server` end to end: the config line, the
// info file, the listening line, a real TLS request, METRICS lines and the
// final line after cancellation.
func TestLinkKeysServerCommand(t *testing.T) {
	dir := t.TempDir()
	info := filepath.Join(dir, "data", "info.json")
	env, out, errBuf := lksEnv(nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, LinkKeys, []string{"server", "--db-path", filepath.Join(dir, "data", "db.sqlite3"),
			"--info-file", info, "--metrics-interval-secs", "1", "--domain", "cli.test"}, env)
	}()
	cfgLine := waitLine(t, out, "config: ")
	if want := linkkeysserver.ConfigLine(linkkeysserver.Config{}); cfgLine != want {
		t.Errorf("config line\n got %q\nwant %q", cfgLine, want)
	}
	l := waitLine(t, out, "listening on ")
	m := listeningRE.FindStringSubmatch(l)
	if m == nil || m[3] != info {
		t.Fatalf("listening line %q", l)
	}
	first := waitLine(t, out, "METRICS ")
	if s, err := linkkeys.ParseMetricsLine(first); err != nil || s.Label != "running" {
		t.Errorf("first METRICS line %q: %v", first, err)
	}
	inf, err := linkkeys.ReadInfo(info)
	if err != nil || fmt.Sprint(inf.Port) != m[1] || inf.Domain != "cli.test" || fmt.Sprint(inf.PID) != m[2] {
		t.Fatalf("info file %+v %v", inf, err)
	}
	tc, err := tls.Dial("tcp", net.JoinHostPort("127.0.0.1", m[1]), linkkeys.ClientTLSConfig(inf.Domain, inf.Fingerprint))
	if err != nil {
		t.Fatal(err)
	}
	body := linkkeys.AppendRequest(nil, &linkkeys.Request{Service: "DomainKeys", Op: "get-domain-keys", Payload: []byte{0xa0}})
	if err := linkkeys.WriteFrame(tc, body); err != nil {
		t.Fatal(err)
	}
	resp, err := linkkeys.ReadFrame(tc, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := linkkeys.DecodeResponse(resp)
	var keys linkkeys.GetDomainKeysResponse
	if err != nil || r.Status != 0 || linkkeys.DecodePayload(r.Payload, &keys) != nil ||
		len(keys.Keys) != 1 || keys.Keys[0].Fingerprint != inf.Fingerprint || keys.Domain != "cli.test" {
		t.Errorf("get-domain-keys: %v status %v %+v; want the server's own key", err, r.Status, keys)
	}
	tc.Close()
	cancel()
	if code := testwait.Recv(t, done, testwait.Long, "server's exit"); code != ExitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, errBuf.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	final, err := linkkeys.ParseMetricsLine(lines[len(lines)-1])
	if err != nil || final.Label != "final" || final.AcceptedConnections != 1 || final.FramesProcessed != 1 {
		t.Errorf("last line %q: %v", lines[len(lines)-1], err)
	}
	if !strings.Contains(errBuf.String(), "fd limit") {
		t.Errorf("no fd limit report on stderr:\n%s", errBuf.String())
	}
}

func TestLinkKeysServerDurationAndEmptyKeys(t *testing.T) {
	dir := t.TempDir()
	env, out, errBuf := lksEnv(nil)
	done := make(chan int, 1)
	go func() {
		done <- Run(context.Background(), LinkKeys, []string{"server", "--db-path", filepath.Join(dir, "db.sqlite3"),
			"--info-file", filepath.Join(dir, "info.json"), "--metrics-interval-secs", "1", "--duration-secs", "1",
			"--empty-domain-keys"}, env)
	}()
	l := waitLine(t, out, "listening on ")
	m := listeningRE.FindStringSubmatch(l)
	inf, err := linkkeys.ReadInfo(filepath.Join(dir, "info.json"))
	if m == nil || err != nil {
		t.Fatalf("%q %v", l, err)
	}
	tc, err := tls.Dial("tcp", net.JoinHostPort("127.0.0.1", m[1]), linkkeys.ClientTLSConfig(inf.Domain, inf.Fingerprint))
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	if err := linkkeys.WriteFrame(tc, linkkeys.AppendRequest(nil, &linkkeys.Request{Service: "DomainKeys", Op: "get-domain-keys"})); err != nil {
		t.Fatal(err)
	}
	resp, err := linkkeys.ReadFrame(tc, 0, nil)
	// On a fresh database the upstream 84-byte envelope (docs/protocol-linkkeys.md, Byte vectors).
	if err != nil || len(resp) != 84 {
		t.Errorf("get-domain-keys with --empty-domain-keys: %d bytes %v, want the 84-byte empty-list envelope", len(resp), err)
	}
	if code := testwait.Recv(t, done, testwait.Long, "server's exit"); code != ExitOK {
		t.Fatalf("exit %d:\n%s", code, errBuf.String())
	}
	var running, final int
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		s, err := linkkeys.ParseMetricsLine(line)
		if err != nil {
			continue
		}
		if s.Label == "final" {
			final++
		} else {
			running++
		}
	}
	if running < 2 || final != 1 {
		t.Errorf("%d running and %d final lines, want at least 2 (at 0 s and 1 s) and 1:\n%s", running, final, out.String())
	}
}

func TestLinkKeysServerBadEnvironment(t *testing.T) {
	env, _, errBuf := lksEnv(map[string]string{"TCP_MAX_CONNECTIONS": "0", "PUBLIC_READ_BURST": "lots", "TCP_PORT": "70000",
		"TCP_MAX_INFLIGHT_FRAME_BYTES": "1000", "TCP_MTLS_DNS_PIN_POSITIVE_TTL_SECONDS": "300", "PUBKEY_CACHE_MAX_ENTRIES": "10"})
	dir := t.TempDir()
	code := Run(context.Background(), LinkKeys, []string{"server", "--db-path", filepath.Join(dir, "db"), "--info-file", filepath.Join(dir, "i.json")}, env)
	if code != ExitUsage {
		t.Errorf("exit %d, want %d", code, ExitUsage)
	}
	for _, want := range []string{`TCP_MAX_CONNECTIONS="0"`, `PUBLIC_READ_BURST="lots"`, `TCP_PORT="70000"`,
		`TCP_MAX_INFLIGHT_FRAME_BYTES="1000": must be a whole number of bytes from 1048576`,
		`TCP_MTLS_DNS_PIN_POSITIVE_TTL_SECONDS="300": not supported by the reference server`,
		`PUBKEY_CACHE_MAX_ENTRIES="10": not supported by the reference server`} {
		if !strings.Contains(errBuf.String(), want) {
			t.Errorf("stderr lacks %s:\n%s", want, errBuf.String())
		}
	}
	if _, err := filepath.Glob(filepath.Join(dir, "db*")); err != nil {
		t.Fatal(err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*")); len(m) != 0 {
		t.Errorf("a bad environment still created files: %v", m)
	}
}

// TestInfoFileAdvertisesMetrics: with --metrics-addr the info file carries metrics_addr, and ddos
// finds the server's accounting there without --server-metrics.
func TestInfoFileAdvertisesMetrics(t *testing.T) {
	dir := t.TempDir()
	info := filepath.Join(dir, "info.json")
	env, out, errBuf := lksEnv(nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, LinkKeys, []string{"server", "--db-path", filepath.Join(dir, "db.sqlite3"),
			"--info-file", info, "--metrics-interval-secs", "1", "--metrics-addr", "127.0.0.1:0"}, env)
	}()
	waitLine(t, out, "listening on ")
	inf, err := linkkeys.ReadInfo(info)
	if err != nil || inf.MetricsAddr == "" {
		t.Fatalf("info file %+v %v: want metrics_addr", inf, err)
	}
	cenv, cout, cerr := lkTestEnv()
	if code := Run(context.Background(), LinkKeys, []string{"ddos", "--info-file", info, "--sources", "20", "--concurrency", "5"}, cenv); code != ExitOK {
		t.Fatalf("ddos exit %d: %s", code, cerr)
	}
	if !strings.Contains(cout.String(), "server accounting") || !strings.Contains(cout.String(), "attempts = server accepted_connections: 20 vs 20 ok") {
		t.Errorf("ddos did not read the server's accounting from metrics_addr:\n%s", cout)
	}
	cancel()
	if code := testwait.Recv(t, done, testwait.Long, "server's exit"); code != ExitOK {
		t.Fatalf("server exit %d: %s", code, errBuf.String())
	}
}

// TestLinkKeysServerSourcePrefixes: TCP_SOURCE_PREFIXES and --source-prefix together name the
// ranges the server counts apart, in single-process and --processes mode (the children get the same
// ones); the config: line names them and the METRICS lines carry their counters. Overlapping or bad
// ones refuse the start.
func TestLinkKeysServerSourcePrefixes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts server processes")
	}
	t.Setenv(childTreeEnv, "linkkeys")
	t.Setenv(linkkeysserver.SourcePrefixesVar, "a=127.0.50.0/24") // what the --processes children inherit
	for _, procs := range []string{"1", "2"} {
		t.Run("processes="+procs, func(t *testing.T) {
			dir := t.TempDir()
			info := filepath.Join(dir, "info.json")
			env, out, errBuf := lksEnv(map[string]string{linkkeysserver.SourcePrefixesVar: "a=127.0.50.0/24"})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan int, 1)
			go func() {
				done <- Run(ctx, LinkKeys, []string{"server", "--db-path", filepath.Join(dir, "db.sqlite3"), "--info-file", info,
					"--metrics-interval-secs", "1", "--processes", procs, "--source-prefix", "b=127.0.51.1-127.0.51.9"}, env)
			}()
			if l := waitLine(t, out, "config: "); !strings.HasSuffix(l, " source_prefixes=a=127.0.50.0/24,b=127.0.51.1-127.0.51.9") {
				t.Fatalf("config line %s", l)
			}
			waitLine(t, out, "listening on ")
			inf, err := linkkeys.ReadInfo(info)
			if err != nil {
				t.Fatal(err)
			}
			addr := net.JoinHostPort("127.0.0.1", fmt.Sprint(inf.Port))
			d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.51.3")}}
			nc, err := d.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			tc := tls.Client(nc, linkkeys.ClientTLSConfig(inf.Domain, inf.Fingerprint))
			if err := tc.Handshake(); err != nil {
				t.Fatal(err)
			}
			tc.Close()
			for {
				l := waitLine(t, out, "METRICS ")
				m, err := linkkeys.ParseMetricsLine(l)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(m.SourceNames(), []string{"a", "b"}) {
					t.Fatalf("prefixes %v in %s", m.SourceNames(), l)
				}
				if b := m.Source("b"); b.Accepted == 1 && b.Established == 1 && m.Source("a").Accepted == 0 {
					break
				}
			}
			cancel()
			if code := testwait.Recv(t, done, testwait.Long, "server's exit"); code != ExitOK {
				t.Fatalf("exit %d: %s", code, errBuf.String())
			}
		})
	}
	env, _, errBuf := lksEnv(map[string]string{linkkeysserver.SourcePrefixesVar: "a=127.0.50.0/24"})
	dir := t.TempDir()
	code := Run(context.Background(), LinkKeys, []string{"server", "--db-path", filepath.Join(dir, "db"), "--info-file", filepath.Join(dir, "i.json"),
		"--source-prefix", "b=127.0.50.9", "--source-prefix", "c"}, env)
	if code != ExitUsage || !strings.Contains(errBuf.String(), `--source-prefix (with TCP_SOURCE_PREFIXES): entry "c" has no '='`) {
		t.Errorf("exit %d: %s", code, errBuf.String())
	}
	env, _, errBuf = lksEnv(map[string]string{linkkeysserver.SourcePrefixesVar: "a=127.0.50.0/24"})
	code = Run(context.Background(), LinkKeys, []string{"server", "--db-path", filepath.Join(dir, "db"), "--info-file", filepath.Join(dir, "i.json"),
		"--source-prefix", "b=127.0.50.9"}, env)
	if code != ExitUsage || !strings.Contains(errBuf.String(), `prefixes "a" (127.0.50.0/24) and "b" (127.0.50.9/32) share addresses`) {
		t.Errorf("exit %d: %s", code, errBuf.String())
	}
}

// TestInfoFileHostAndConfigEndpoint: a server listening on one specific non-loopback address of
// this machine writes it as the info file's host (nothing is sent to it: the listener is only
// bound); one on loopback writes none; its metrics endpoint serves its config: line at /config.
func TestInfoFileHostAndConfigEndpoint(t *testing.T) {
	var own string
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if p, ok := a.(*net.IPNet); ok && p.IP.To4() != nil && !p.IP.IsLoopback() && !p.IP.IsLinkLocalUnicast() {
				own = p.IP.String()
				break
			}
		}
	}
	for _, host := range []string{"127.0.0.1", own} {
		if host == "" {
			t.Log("this machine has no non-loopback IPv4 address: only the loopback case runs")
			continue
		}
		dir := t.TempDir()
		info := filepath.Join(dir, "info.json")
		env, out, errBuf := lksEnv(nil)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan int, 1)
		go func() {
			done <- Run(ctx, LinkKeys, []string{"server", "--db-path", filepath.Join(dir, "db.sqlite3"), "--info-file", info,
				"--listen", net.JoinHostPort(host, "0"), "--metrics-addr", "127.0.0.1:0"}, env)
		}()
		waitLine(t, out, "listening on ")
		inf, err := linkkeys.ReadInfo(info)
		if err != nil {
			t.Fatal(err)
		}
		want := host
		if host == "127.0.0.1" {
			want = ""
		}
		if inf.Host != want {
			t.Errorf("listening on %s: info host %q, want %q", host, inf.Host, want)
		}
		resp, err := http.Get("http://" + inf.MetricsAddr + "/config")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.HasPrefix(string(b), "config: ") || !strings.Contains(out.String(), strings.TrimSpace(string(b))) {
			t.Errorf("/config answered %q; the server printed:\n%s", b, out.String())
		}
		cancel()
		if code := testwait.Recv(t, done, testwait.Long, "server's exit"); code != ExitOK {
			t.Fatalf("server exit %d: %s", code, errBuf.String())
		}
	}
}
