// Package testbed makes hosts for tests: Linux network namespaces, each with one address on a
// private bridge that itself lives in a namespace of its own, so a client and a server under test
// cross two real network stacks the way a load machine and a deployment do. Nothing is added to the
// root namespace; every address comes from 198.18.0.0/15, the range RFC 2544 sets aside for
// benchmarking: hosts are 198.18.0.1, .2, … and a host's source prefix (the block of addresses a
// load machine owns) is 198.19.N.0/24, routed local on that host and via it from the others.
// scripts/testbed.sh makes the same hosts by hand (docs/field.md, "The test bed").
//
// The package is for tests only and imports no server or load package: tests run the real
// binaries inside the hosts (Host.Command, Host.Start). It needs root and the ip tool; without them
// New skips the test with the reason, except under CI=true, where it fails.
package testbed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// BridgeNet is the hosts' network: host i (1-based) is 198.18.0.i/24.
const BridgeNet = "198.18.0.0/24"

// Options says what to make.
type Options struct {
	// Hosts is the number of hosts (1 to 250).
	Hosts int
	// SourcePrefixes gives a host (1-based index) a routed block of source addresses
	// ("198.19.2.0/24"): routed local on that host (ip route add local PREFIX dev lo) and via the
	// host's address from every other host. Prefixes must lie in 198.18.0.0/15 outside BridgeNet.
	SourcePrefixes map[int]string
	// Rate, when set, limits every host's link in both directions with tbf ("100mbit", "1gbit").
	Rate string
}

// Bed is a set of hosts on one bridge. Its cleanup (registered by New) stops what was started in
// it and deletes every namespace it made, whether the test passed or not.
type Bed struct {
	// Prefix starts every namespace name of this bed ("lp-4242-1").
	Prefix string
	// Bridge is the namespace holding the bridge.
	Bridge string
	Hosts  []*Host
	made   []string
}

// Host is one namespace on the bridge.
type Host struct {
	// Index is the host's number, from 1.
	Index int
	// Name is the namespace's name.
	Name string
	// Addr is the host's address on the bridge (198.18.0.Index).
	Addr string
	// SourcePrefix is the host's routed source block, if any.
	SourcePrefix string
	// Link is the host's interface on the bridge.
	Link string
}

var (
	seq       atomic.Int64
	staleOnce sync.Once
	benchNet  = netip.MustParsePrefix("198.18.0.0/15")
	bridgeNet = netip.MustParsePrefix(BridgeNet)
)

// unavailable skips the test, or fails it under CI=true where the test bed must run.
func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := "testbed: " + fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: the multi-host tests must run here)", msg)
	}
	t.Skip(msg)
}

// Available says whether this process can make hosts, and if not why.
func Available() error {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("network namespaces are Linux only, not %s", runtime.GOOS)
	}
	if os.Geteuid() != 0 {
		return errors.New("making network namespaces needs root (run the tests as root, as .ci/run does)")
	}
	for _, tool := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("the %s tool (iproute2) is not on PATH", tool)
		}
	}
	return nil
}

// New makes o.Hosts hosts on a fresh bridge and registers their removal with t.Cleanup.
func New(t testing.TB, o Options) *Bed {
	t.Helper()
	if err := Available(); err != nil {
		unavailable(t, "%v", err)
	}
	if o.Hosts < 1 || o.Hosts > 250 {
		t.Fatalf("testbed: Hosts = %d; give 1 to 250", o.Hosts)
	}
	for i, p := range o.SourcePrefixes {
		if err := checkPrefix(p); err != nil {
			t.Fatalf("testbed: source prefix of host %d: %v", i, err)
		}
		if i < 1 || i > o.Hosts {
			t.Fatalf("testbed: source prefix %s for host %d, but there are hosts 1 to %d", p, i, o.Hosts)
		}
	}
	staleOnce.Do(func() { removeStale(t) })
	b := &Bed{Prefix: fmt.Sprintf("lp-%d-%d", os.Getpid(), seq.Add(1))}
	b.Bridge = b.Prefix + "-br"
	t.Cleanup(func() { b.remove(t) })
	if err := b.build(o); err != nil {
		unavailable(t, "making the hosts: %v", err)
	}
	return b
}

func checkPrefix(p string) error {
	pre, err := netip.ParsePrefix(p)
	if err != nil {
		return fmt.Errorf("%q is not a prefix (198.19.1.0/24): %w", p, err)
	}
	if !pre.Addr().Is4() || !benchNet.Contains(pre.Addr()) || pre.Bits() < benchNet.Bits() {
		return fmt.Errorf("%s is outside 198.18.0.0/15, the only range the test bed uses", p)
	}
	if pre.Overlaps(bridgeNet) {
		return fmt.Errorf("%s overlaps the hosts' network %s", p, BridgeNet)
	}
	return nil
}

func (b *Bed) build(o Options) error {
	if err := b.addNetns(b.Bridge); err != nil {
		return err
	}
	if err := ipCmd("ip", "-n", b.Bridge, "link", "set", "lo", "up"); err != nil {
		return err
	}
	if err := ipCmd("ip", "-n", b.Bridge, "link", "add", "br0", "type", "bridge"); err != nil {
		return err
	}
	if err := ipCmd("ip", "-n", b.Bridge, "link", "set", "br0", "up"); err != nil {
		return err
	}
	for i := 1; i <= o.Hosts; i++ {
		h := &Host{Index: i, Name: fmt.Sprintf("%s-h%d", b.Prefix, i), Addr: fmt.Sprintf("198.18.0.%d", i), Link: "eth0",
			SourcePrefix: o.SourcePrefixes[i]}
		if err := b.addNetns(h.Name); err != nil {
			return err
		}
		peer := fmt.Sprintf("v%d", i)
		// Both ends are created straight inside their namespaces: the root namespace never holds one.
		steps := [][]string{
			{"ip", "link", "add", h.Link, "netns", h.Name, "type", "veth", "peer", "name", peer, "netns", b.Bridge},
			{"ip", "-n", b.Bridge, "link", "set", peer, "master", "br0", "up"},
			{"ip", "-n", h.Name, "link", "set", "lo", "up"},
			{"ip", "-n", h.Name, "addr", "add", h.Addr + "/24", "dev", h.Link},
			{"ip", "-n", h.Name, "link", "set", h.Link, "up"},
		}
		if o.Rate != "" {
			steps = append(steps, tbf(h.Name, h.Link, o.Rate), tbf(b.Bridge, peer, o.Rate))
		}
		if h.SourcePrefix != "" {
			steps = append(steps, []string{"ip", "-n", h.Name, "route", "add", "local", h.SourcePrefix, "dev", "lo"})
		}
		for _, s := range steps {
			if err := ipCmd(s...); err != nil {
				return err
			}
		}
		b.Hosts = append(b.Hosts, h)
	}
	for _, h := range b.Hosts {
		if h.SourcePrefix == "" {
			continue
		}
		for _, o := range b.Hosts {
			if o != h {
				if err := ipCmd("ip", "-n", o.Name, "route", "add", h.SourcePrefix, "via", h.Addr); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// tbf is the command limiting dev's egress in ns to rate.
func tbf(ns, dev, rate string) []string {
	return []string{"tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf", "rate", rate, "burst", "256kbit", "latency", "50ms"}
}

// Limit sets (or replaces) a tbf rate on host h's link, both directions.
func (b *Bed) Limit(h *Host, rate string) error {
	if err := ipCmd(tbf(h.Name, h.Link, rate)...); err != nil {
		return err
	}
	return ipCmd(tbf(b.Bridge, fmt.Sprintf("v%d", h.Index), rate)...)
}

func (b *Bed) addNetns(name string) error {
	if err := ipCmd("ip", "netns", "add", name); err != nil {
		return err
	}
	b.made = append(b.made, name)
	return nil
}

func (b *Bed) remove(t testing.TB) {
	for i := len(b.made) - 1; i >= 0; i-- {
		if err := ipCmd("ip", "netns", "del", b.made[i]); err != nil {
			t.Errorf("testbed: removing namespace %s: %v", b.made[i], err)
		}
	}
	b.made = nil
}

// removeStale deletes lp-PID-… namespaces whose process is gone (a test binary killed before its
// cleanup ran). Namespaces of running processes, and names of another form, are left alone.
func removeStale(t testing.TB) {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		parts := strings.SplitN(f[0], "-", 3)
		if len(parts) < 3 || parts[0] != "lp" {
			continue
		}
		pid, err := strconv.Atoi(parts[1])
		if err != nil || pid == os.Getpid() || !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			continue
		}
		if err := ipCmd("ip", "netns", "del", f[0]); err == nil {
			t.Logf("testbed: removed stale namespace %s (process %d is gone)", f[0], pid)
		}
	}
}

func ipCmd(args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// Command returns a command that runs name inside h's namespace (ip netns exec).
func (h *Host) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", h.Name, name}, args...)...)
}

// Run runs name inside h and returns its combined output; a non-zero exit is an error carrying
// the output.
func (h *Host) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	out, err := h.Command(ctx, name, args...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("testbed: %s on %s: %w\n%s", name, h.Name, err, out)
	}
	return out, nil
}

// Proc is a background process in a host.
type Proc struct {
	Cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error
}

// Output returns what the process wrote so far (stdout and stderr together).
func (p *Proc) Output() string { return p.out.String() }

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err is the process's exit error, once Done is closed.
func (p *Proc) Err() error { <-p.done; return p.err }

// Start starts name inside h in the background. At the end of the test it is killed by its PID
// (ip netns exec replaces itself with the command, so the PID is the command's) and waited for;
// its output is logged when the test failed.
func (h *Host) Start(t testing.TB, name string, args ...string) *Proc {
	t.Helper()
	cmd := exec.Command("ip", append([]string{"netns", "exec", h.Name, name}, args...)...)
	p := &Proc{Cmd: cmd, out: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("testbed: starting %s on %s: %v", name, h.Name, err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			select {
			case <-p.done:
			case <-time.After(10 * time.Second):
				t.Errorf("testbed: %s (pid %d) on %s did not exit after SIGKILL", name, cmd.Process.Pid, h.Name)
			}
		}
		if t.Failed() {
			t.Logf("output of %s on %s:\n%s", filepath.Base(name), h.Name, p.Output())
		}
	})
	return p
}

// WaitFor polls cond every 20 ms until it is true, failing the test with what after d.
func WaitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("testbed: %s: not within %s", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Build builds the packages (e.g. "./cmd/linkkeys-server") of this module into a temporary folder
// and returns the binaries' paths by base name. Go's build cache makes repeated builds quick.
func Build(t testing.TB, pkgs ...string) map[string]string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatalf("testbed: %v", err)
	}
	dir := t.TempDir()
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	args := append([]string{"build", "-o", dir + string(os.PathSeparator)}, pkgs...)
	cmd := exec.Command(goBin, args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("testbed: go build %s: %v\n%s", strings.Join(pkgs, " "), err, out)
	}
	bins := map[string]string{}
	for _, p := range pkgs {
		bins[filepath.Base(p)] = filepath.Join(dir, filepath.Base(p))
	}
	return bins
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
