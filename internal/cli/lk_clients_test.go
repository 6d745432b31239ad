package cli

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/loadproof/loadproof/internal/linkkeys"
	"github.com/loadproof/loadproof/internal/linkkeysload"
	"github.com/loadproof/loadproof/internal/linkkeysserver"
	"github.com/loadproof/loadproof/internal/testwait"
)

func lkTestEnv() (*Env, *bytes.Buffer, *bytes.Buffer) {
	var out, errOut bytes.Buffer
	return &Env{Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" },
		Logger: slog.New(slog.NewTextHandler(&errOut, nil))}, &out, &errOut
}

func TestLinkKeysClientUsageErrors(t *testing.T) {
	info := filepath.Join(t.TempDir(), "info.json")
	if err := linkkeys.WriteInfo(info, linkkeys.Info{Port: 1, Domain: "loadtest.local", Fingerprint: strings.Repeat("a", 64), PID: 1}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"connections", "--info-file", info, "--client-ip-base", "127.0.1"}, ExitUsage,
			`error: invalid --client-ip-base "127.0.1": invalid IPv4 address syntax`},
		{[]string{"ddos", "--info-file", info, "--client-ip-base", "::1"}, ExitUsage, `error: invalid --client-ip-base "::1": invalid IPv4 address syntax`},
		{[]string{"request-bench", "--info-file", info, "--op", "nope"}, ExitUsage, `invalid value "nope" for --op`},
		{[]string{"request-bench", "--info-file", info, "--rate", "-5"}, ExitUsage, `invalid --rate "-5"`},
		{[]string{"connections", "--info-file", info, "--concurrency", "0"}, ExitUsage, "--concurrency 0: must be at least 1"},
		{[]string{"connections", "--count", "-1"}, ExitUsage, "invalid argument"},
		{[]string{"worker"}, ExitUsage, "--spec and --result are required"},
		{[]string{"combined", "--info-file", info}, ExitUsage, "no stream"},
		{[]string{"combined", "--info-file", info, "--held", "10", "--held-ip-count", "300", "--handshake-concurrency", "1", "--handshake-ip-base", "127.0.1.200"},
			ExitUsage, "share source addresses"},
		{[]string{"combined", "--info-file", info, "--ddos-wave", "at=x,sourcez=1"}, ExitUsage, `at="x": want seconds from 0 to 86400; unknown key "sourcez"`},
		// A target that is not loopback needs the exact --allow-host; so does a remote metrics URL.
		{[]string{"connections", "--target", "198.18.0.1:4433", "--fingerprint", strings.Repeat("a", 64), "--domain", "d"}, ExitUsage,
			"needs the exact --allow-host 198.18.0.1"},
		{[]string{"connections", "--target", "198.18.0.1:4433", "--fingerprint", strings.Repeat("a", 64), "--domain", "d", "--allow-host", "198.18.0.2"}, ExitUsage,
			"needs the exact --allow-host 198.18.0.1"},
		{[]string{"request-bench", "--info-file", info, "--server-metrics", "http://198.18.0.9:9100/metrics"}, ExitUsage, "needs the exact --allow-host 198.18.0.9"},
		{[]string{"combined", "--info-file", info, "--held", "1", "--target", "10.9.9.9:1"}, ExitUsage, "needs the exact --allow-host 10.9.9.9"},
		{[]string{"ddos", "--target", "127.0.0.1:1", "--info-file", filepath.Join(t.TempDir(), "none.json")}, ExitUsage,
			"--fingerprint, --domain not given and the info file cannot supply them"},
		// Source addresses this machine cannot bind are refused before anything is sent.
		{[]string{"handshake-bench", "--info-file", info, "--client-ip-base", "198.18.255.254", "--client-ip-count", "1"}, ExitUsage,
			"cannot bind source address 198.18.255.254"},
		// A remote target needs this machine's own source addresses.
		{[]string{"ddos", "--info-file", info, "--target", "198.18.0.1:4433", "--allow-host", "198.18.0.1"}, ExitUsage,
			"are loopback addresses, which cannot reach 198.18.0.1"},
	}
	for _, c := range cases {
		env, _, errOut := lkTestEnv()
		code := Run(context.Background(), LinkKeys, c.args, env)
		if code != c.code || !strings.Contains(errOut.String(), c.msg) {
			t.Errorf("%v: exit %d (want %d), stderr %q (want %q)", c.args, code, c.code, errOut.String(), c.msg)
		}
	}
	// The missing-file message is the seed's.
	env, _, errOut := lkTestEnv()
	missing := filepath.Join(t.TempDir(), "nope.json")
	code := Run(context.Background(), LinkKeys, []string{"handshake-bench", "--info-file", missing}, env)
	if code != ExitFailure || !strings.Contains(errOut.String(), "error: reading info file "+missing+": no such file or directory (is the `server` subcommand running?)") {
		t.Errorf("stderr %q", errOut.String())
	}
}

func TestLinkKeysWorkerArgs(t *testing.T) {
	env, _, _ := lkTestEnv()
	for _, c := range []struct {
		tree Tree
		path []string
		want string
	}{
		{LinkKeys, []string{"connections"}, "worker"},
		{Loadproof, []string{"linkkeys", "connections"}, "linkkeys worker"},
	} {
		root := NewRoot(c.tree, env)
		cmd, _, err := root.Find(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(lkWorkerArgs(cmd), " "); got != c.want {
			t.Errorf("%v: worker args %q, want %q", c.path, got, c.want)
		}
		if got := strings.Join(lkServerArgs(cmd), " "); got != strings.Replace(c.want, "worker", "server", 1) {
			t.Errorf("%v: server args %q", c.path, got)
		}
	}
}

func TestLinkKeysClientsRunAgainstServer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every LinkKeys client against a server (-short)")
	}
	// combined runs its request stream in a worker process of its own (--stream-processes): this
	// binary, started again, acts as linkkeys-loadtest.
	t.Setenv(childTreeEnv, "linkkeys")
	lim := map[string]string{"TCP_HANDSHAKE_BURST": "1000000", "TCP_HANDSHAKE_GLOBAL_BURST": "1000000",
		"PUBLIC_READ_BURST": "1000000000", "PUBLIC_READ_GLOBAL_BURST": "1000000000"}
	cfg, err := linkkeysserver.ConfigFromEnv(func(k string) string { return lim[k] })
	if err != nil {
		t.Fatal(err)
	}
	ts, err := linkkeysserver.NewTestServer(linkkeysserver.TestServerOptions{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	dir := t.TempDir()
	info := filepath.Join(dir, "info.json")
	if err := linkkeys.WriteInfo(info, ts.Info()); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args  []string
		first string
	}{
		{[]string{"connections", "--count", "40", "--concurrency", "8", "--hold-secs", "0", "--client-ip-count", "4"},
			"connections: target=40 concurrency=8 hold_secs=0 client_ips=4 (base 127.0.1.0)"},
		{[]string{"handshake-bench", "--duration-secs", "1", "--concurrency", "2", "--resume"}, "handshake-bench: duration_secs=1 concurrency=2"},
		{[]string{"request-bench", "--connections", "2", "--duration-secs", "1", "--pipeline", "4"}, "request-bench: op=domain-keys connections=2 duration_secs=1"},
		{[]string{"request-bench", "--connections", "2", "--duration-secs", "1", "--rate", "500", "--op", "hello"}, "request-bench: op=hello connections=2 duration_secs=1"},
		{[]string{"ddos", "--sources", "30", "--concurrency", "5"}, "ddos: sources=30 concurrency=5 (one connection attempt per distinct source address)"},
		{[]string{"combined", "--held", "20", "--held-concurrency", "4", "--handshake-concurrency", "2", "--duration-secs", "1",
			"--request-connections", "2", "--ddos-wave", "sources=20,at=0.2,concurrency=4"},
			"combined: streams held=127.0.1.0+64 handshakes=127.0.2.0+128 requests=127.0.3.0+32 ddos-1=127.5.0.0+20 (each from its own source range, all at once)"},
	}
	for i, c := range cases {
		env, out, errOut := lkTestEnv()
		jsonPath := filepath.Join(dir, c.args[0]+".json")
		args := append(append([]string(nil), c.args...), "--info-file", info, "--json", jsonPath)
		if code := Run(context.Background(), LinkKeys, args, env); code != ExitOK {
			t.Fatalf("case %d %v: exit %d\n%s%s", i, args, code, out.String(), errOut.String())
		}
		if first, _, _ := strings.Cut(out.String(), "\n"); first != c.first {
			t.Errorf("%v: first line %q, want %q", c.args, first, c.first)
		}
		b, err := os.ReadFile(jsonPath)
		if err != nil {
			t.Fatal(err)
		}
		res, err := linkkeysload.ReadResult(b)
		processes := 1 // one machine record per client process
		if c.args[0] == "combined" {
			processes = 2 // the request stream's and the other streams'
		}
		if err != nil || res.Command != c.args[0] || res.Flags["info-file"] != info || len(res.Machines) != processes || res.Machines[0].GoVersion == "" {
			t.Fatalf("%v: result %v %+v, %d machine records", c.args, err, res.Flags, len(res.Machines))
		}
		// The report is drawn from the result file alone: it redraws the same header and DONE line.
		renv, rout, rerr := lkTestEnv()
		if code := Run(context.Background(), Loadproof, []string{"report", jsonPath}, renv); code != ExitOK {
			t.Fatalf("report %s: exit %d: %s", jsonPath, code, rerr)
		}
		for _, line := range strings.Split(out.String(), "\n") {
			if strings.HasPrefix(line, c.args[0]+": ") && !strings.Contains(rout.String(), line+"\n") {
				t.Errorf("%v: report of the result file lacks the command's line %q:\n%s", c.args, line, rout)
			}
		}
	}
}

// TestLinkKeysClientsByFlagsAlone: connections and request-bench reach a real server on 127.0.0.1
// from --target, --fingerprint and --domain alone, with no info file anywhere.
func TestLinkKeysClientsByFlagsAlone(t *testing.T) {
	ts, err := linkkeysserver.NewTestServer(linkkeysserver.TestServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	dir := t.TempDir()
	flags := []string{"--target", fmt.Sprintf("127.0.0.1:%d", ts.Port), "--fingerprint", ts.Fingerprint, "--domain", ts.Domain}
	for _, args := range [][]string{
		{"connections", "--count", "12", "--concurrency", "4", "--hold-secs", "0", "--client-ip-count", "3"},
		{"request-bench", "--connections", "2", "--duration-secs", "1", "--op", "hello"},
	} {
		env, out, errOut := lkTestEnv()
		jsonPath := filepath.Join(dir, args[0]+".json")
		all := append(append(append([]string(nil), args...), flags...), "--json", jsonPath)
		if code := Run(context.Background(), LinkKeys, all, env); code != ExitOK {
			t.Fatalf("%v: exit %d\n%s%s", all, code, out, errOut)
		}
		b, err := os.ReadFile(jsonPath)
		if err != nil {
			t.Fatal(err)
		}
		res, err := linkkeysload.ReadResult(b)
		if err != nil {
			t.Fatal(err)
		}
		if res.TargetInfo.Addr.Port() != ts.Port || res.TargetInfo.Fingerprint != ts.Fingerprint || res.TargetInfo.PID != 0 {
			t.Errorf("%s: target %+v", args[0], res.TargetInfo)
		}
		switch args[0] {
		case "connections":
			if res.Attempts == nil || res.Attempts.Succeeded != 12 {
				t.Errorf("connections: %+v", res.Attempts)
			}
		case "request-bench":
			if res.Requests == nil || res.Requests.Completed == 0 || res.Requests.Errors != 0 {
				t.Errorf("request-bench: %+v", res.Requests)
			}
		}
	}
}

// holdingLog closes seen when the "holding" message is logged (the hold has begun).
type holdingLog struct {
	once sync.Once
	seen chan struct{}
}

func (h *holdingLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *holdingLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "holding" {
		h.once.Do(func() { close(h.seen) })
	}
	return nil
}
func (h *holdingLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *holdingLog) WithGroup(string) slog.Handler      { return h }

// TestLinkKeysConnectionsExitsNonZeroWhenTheServerDiesMidHold: the server goes away while
// connections holds; the command reports the lost connections with the reason and exits 1 (it used
// to print failed=0 and exit 0). The info file's pid is a process that has exited, as a dead
// server's would be.
func TestLinkKeysConnectionsExitsNonZeroWhenTheServerDiesMidHold(t *testing.T) {
	ts, err := linkkeysserver.NewTestServer(linkkeysserver.TestServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Skip("no `true` to make an exited pid:", err)
	}
	info := filepath.Join(t.TempDir(), "info.json")
	inf := ts.Info()
	inf.PID = uint32(gone.Process.Pid)
	if err := linkkeys.WriteInfo(info, inf); err != nil {
		t.Fatal(err)
	}
	env, out, errOut := lkTestEnv()
	h := &holdingLog{seen: make(chan struct{})}
	env.Logger = slog.New(h)
	code := make(chan int, 1)
	go func() {
		code <- Run(context.Background(), LinkKeys, []string{"connections", "--info-file", info, "--count", "10",
			"--concurrency", "4", "--hold-secs", "600", "--client-ip-count", "2", "--workers", "1"}, env)
	}()
	select {
	case <-h.seen:
	case c := <-code:
		t.Fatalf("exit %d before the hold:\n%s%s", c, out, errOut)
	case <-time.After(testwait.Long):
		t.Fatalf("no hold within %v:\n%s%s", testwait.Long, out, errOut)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ts.Server.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if c := testwait.Recv(t, code, testwait.Long, "the client's exit after the server stopped"); c != ExitFailure {
		t.Errorf("exit %d, want %d", c, ExitFailure)
	}
	want := fmt.Sprintf("; the server process (pid %d) is no longer running; the hold was not held (it lasted ", inf.PID)
	if !strings.Contains(out.String(), "  LOST: 10 of 10 held connections ended during the hold (") || !strings.Contains(out.String(), want) {
		t.Errorf("stdout:\n%s", out)
	}
	if !strings.Contains(errOut.String(), "error: linkkeysload: the hold was not held: 10 of 10 held connections ended before the 600s hold did") {
		t.Errorf("stderr:\n%s", errOut)
	}
}

// TestLinkKeysFlagHelp: in every linkkeys command's help, a flag's type name says what it takes
// (a path flag shows "file", not a word picked out of its help), a bool flag shows none, and no
// flag shows two defaults.
func TestLinkKeysFlagHelp(t *testing.T) {
	env, _, _ := lkTestEnv()
	files := map[string]bool{"info-file": true, "json": true, "db-path": true}
	for _, tree := range []Tree{LinkKeys, Loadproof} {
		root := NewRoot(tree, env)
		var walk func(c *cobra.Command)
		walk = func(c *cobra.Command) {
			for _, sub := range c.Commands() {
				walk(sub)
			}
			if tree == Loadproof && !strings.Contains(c.CommandPath(), " linkkeys") {
				return
			}
			c.LocalFlags().VisitAll(func(f *pflag.Flag) {
				name, _ := pflag.UnquoteUsage(f)
				where := c.CommandPath() + " --" + f.Name
				switch {
				case f.Value.Type() == "bool" && name != "":
					t.Errorf("%s: a bool flag shown as taking %q", where, name)
				case files[f.Name] && name != "file":
					t.Errorf("%s: type shown as %q, want file", where, name)
				case strings.Contains(f.Usage, "(default"):
					t.Errorf("%s: the help states a default of its own next to pflag's: %q", where, f.Usage)
				}
			})
			for _, line := range strings.Split(c.LocalFlags().FlagUsages(), "\n") {
				if strings.Count(line, "(default") > 1 {
					t.Errorf("%s: two defaults: %s", c.CommandPath(), line)
				}
			}
		}
		walk(root)
	}
}

// lkInfoServer starts a LinkKeys test server with opts (closed when the test ends) and writes its
// info file into a new temporary directory; it returns the info file's path and the directory.
func lkInfoServer(t *testing.T, opts linkkeysserver.TestServerOptions) (info, dir string) {
	t.Helper()
	ts, err := linkkeysserver.NewTestServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ts.Close() })
	dir = t.TempDir()
	info = filepath.Join(dir, "info.json")
	if err := linkkeys.WriteInfo(info, ts.Info()); err != nil {
		t.Fatal(err)
	}
	return info, dir
}
