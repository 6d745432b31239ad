package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/loadproof/loadproof/internal/linkkeysload"
	"github.com/loadproof/loadproof/internal/result"
)

// TestClientTargetsLinkKeysSpec (finding 1): a LinkKeys task's spec is authorized by the one
// section it runs: two sections are refused, a combined target is checked like the others, and
// the server_metrics location is among the things the worker authorizes.
func TestClientTargetsLinkKeysSpec(t *testing.T) {
	env := &Env{Getenv: func(string) string { return "" }}
	for _, c := range []struct {
		name, spec string
		want       []string
		bad        string
	}{
		{"two sections", `{"command":"connections","connections":{"target":{"addr":"127.0.0.1:1"}},"requests":{"target":{"addr":"198.18.0.9:2"}}}`, nil, "2 sections (connections, requests)"},
		{"combined", `{"command":"combined","combined":{"target":{"addr":"198.18.0.9:2"}}}`, []string{"tcp://198.18.0.9:2"}, ""},
		{"metrics", `{"command":"ddos","server_metrics":"http://198.18.0.9/metrics","ddos":{"target":{"addr":"127.0.0.1:7"}}}`, []string{"tcp://127.0.0.1:7", "http://198.18.0.9/metrics"}, ""},
		{"none", `{"command":"ddos"}`, nil, "names no target"},
	} {
		got, err := clientTargets(env, []string{"linkkeys", "worker", "--spec", c.spec})
		if c.bad != "" {
			if err == nil || !strings.Contains(err.Error(), c.bad) {
				t.Errorf("%s: %v; want %q", c.name, err, c.bad)
			}
			continue
		}
		if err != nil || strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("%s: %q, %v; want %q", c.name, got, err, c.want)
		}
	}
}

// TestWorkerSetSources (issue 25 section 3): a worker's own source range replaces the task's.
func TestWorkerSetSources(t *testing.T) {
	args := []string{"linkkeys", "worker", "--spec", `{"command":"connections","connections":{"target":{"addr":"127.0.0.1:1"},"sources":{"Base":2130706433,"Count":4}}}`}
	out, err := setSources(args, result.Segment{Index: 1, Count: 3}, "127.5.0.1", 9)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out[3], `"sources":{"Base":2131034113,"Count":9}`) {
		t.Errorf("spec after --client-ip-base: %s", out[3])
	}
	// ddos: one attempt per source numbered across the run; segment 3 of 3 of 300 sources starts at
	// this worker's own first address and stays inside its 100 addresses.
	ddos := []string{"linkkeys", "worker", "--spec", `{"command":"ddos","segment":{"index":0,"count":1},"ddos":{"target":{"addr":"127.0.0.1:1"},"sources":300,"client_ip_base":2131034112}}`}
	workerBind = func(a linkkeysload.IPv4) error { // this test's machine holds 198.19.5.0/24 only
		if strings.HasPrefix(a.String(), "198.19.5.") {
			return nil
		}
		return syscall.EADDRNOTAVAIL
	}
	t.Cleanup(func() { workerBind = nil })
	out, err = setSources(ddos, result.Segment{Index: 2, Count: 3}, "198.19.5.1", 100)
	if err != nil {
		t.Fatal(err)
	}
	var spec linkkeysload.WorkerSpec
	if err := json.Unmarshal([]byte(out[3]), &spec); err != nil || spec.DDoS == nil {
		t.Fatalf("ddos spec after --client-ip-base: %s %v", out[3], err)
	}
	first, last := linkkeysload.NthLoopbackAddr(spec.DDoS.Base, 200), linkkeysload.NthLoopbackAddr(spec.DDoS.Base, 299)
	if first.String() != "198.19.5.1" || last.String() != "198.19.5.100" {
		t.Errorf("ddos segment 3/3 sources %s to %s, want 198.19.5.1 to 198.19.5.100", first, last)
	}
	// A block this machine does not hold refuses the task with the command that adds it.
	out, err = setSources(ddos, result.Segment{Index: 2, Count: 3}, "192.0.2.1", 100)
	if err == nil || !strings.Contains(err.Error(), "cannot bind source address 192.0.2.1") || !strings.Contains(err.Error(), "ip route add local") {
		t.Errorf("a worker block this machine does not hold: %q %v, want a refusal naming the address and the route command", out, err)
	}
	// Without --client-ip-base the task's own range is checked on this machine, segment by segment,
	// and the arguments pass unchanged: here the third of 198.19.4.0+300 is 198.19.4.200+100, of
	// which this machine holds none.
	own := []string{"linkkeys", "worker", "--spec", `{"command":"ddos","segment":{"index":0,"count":1},"ddos":{"target":{"addr":"198.18.0.1:1"},"sources":300,"client_ip_base":3323134976}}`}
	_, err = setSources(own, result.Segment{Index: 2, Count: 3}, "", 0)
	if err == nil || !strings.Contains(err.Error(), "cannot bind source address 198.19.4.200") {
		t.Errorf("a task range this worker does not hold: %v, want a refusal naming 198.19.4.200", err)
	}
	if got, err := setSources(own, result.Segment{Index: 0, Count: 3}, "", 0); err == nil {
		t.Errorf("segment 1/3 of 198.19.4.0+300 (198.19.4.0+100) passed on this machine: %q", got)
	}
	workerBind = func(linkkeysload.IPv4) error { return nil }
	if got, err := setSources(own, result.Segment{Index: 2, Count: 3}, "", 0); err != nil || strings.Join(got, " ") != strings.Join(own, " ") {
		t.Errorf("a task range this worker holds: %q %v, want the arguments unchanged", got, err)
	}
	if _, err := setSources(ddos, result.Segment{Index: 2, Count: 3}, "198.19.5.1", 99); err == nil || !strings.Contains(err.Error(), "--client-ip-count is 99") {
		t.Errorf("a ddos segment of 100 attempts on 99 addresses: %v, want a refusal naming --client-ip-count", err)
	}
	if _, err := setSources([]string{"linkkeys", "worker", "--spec", `{"command":"combined","combined":{}}`}, result.Whole, "127.5.0.1", 9); err == nil {
		t.Error("a combined spec's source prefixes were rewritten")
	}
	if got, err := setSources([]string{"keycast", "run", "--url", "http://x"}, result.Whole, "127.5.0.1", 9); err != nil || len(got) != 4 {
		t.Errorf("keycast task: %q %v", got, err)
	}
}

// TestFailClosedAndSecretsOffTheTerminal (finding 6): on an external NATS a coordinator or worker
// without a secret refuses to start; --insecure-unsigned runs with a loud warning recorded in the
// manifest; the --listen hint names the token and secret files, never their contents.
func TestFailClosedAndSecretsOffTheTerminal(t *testing.T) {
	url, token := externalNATS(t)
	dir := t.TempDir()
	client := []string{"--", "keycast", "run", "--url", "http://127.0.0.1:1", "-d", "1"}
	code, errs := umbrella(context.Background(), t, append([]string{"coordinate", "--workers", "1", "--nats", url, "--nats-token", token, "--spawn=false",
		"--join-timeout", "200ms", "--manifest", filepath.Join(dir, "a.json")}, client...)...)
	if code != ExitCouldNotRun || !strings.Contains(errs, "--insecure-unsigned") {
		t.Errorf("coordinator without a secret: exit %d\n%s", code, errs)
	}
	code, errs = umbrella(context.Background(), t, "worker", "--nats", url, "--nats-token", token, "--join-timeout", "200ms")
	if code != ExitCouldNotRun || !strings.Contains(errs, "--insecure-unsigned") {
		t.Errorf("worker without a secret: exit %d\n%s", code, errs)
	}
	man := filepath.Join(dir, "b.json")
	code, errs = umbrella(context.Background(), t, append([]string{"coordinate", "--workers", "1", "--nats", url, "--nats-token", token, "--spawn=false",
		"--insecure-unsigned", "--join-timeout", "200ms", "--manifest", man}, client...)...)
	if code != ExitCouldNotRun || !strings.Contains(errs, "INSECURE") || strings.Count(errs, "did not join within") != 1 {
		t.Errorf("--insecure-unsigned: exit %d; want 3, one INSECURE warning and the join error once:\n%s", code, errs)
	}
	var m coordManifest
	if b, err := os.ReadFile(man); err != nil || json.Unmarshal(b, &m) != nil || !m.InsecureUnsigned || m.Refused == nil {
		t.Errorf("manifest: insecure_unsigned %v, refused %v (%v)", m.InsecureUnsigned, m.Refused, err)
	}
	listen := filepath.Join(dir, "c.json")
	code, errs = umbrella(context.Background(), t, append([]string{"coordinate", "--workers", "1", "--listen", "127.0.0.1:0", "--join-timeout", "200ms",
		"--manifest", listen}, client...)...)
	tok, err1 := os.ReadFile(listen + ".nats-token")
	sec, err2 := os.ReadFile(listen + ".secret")
	if code != ExitCouldNotRun || err1 != nil || err2 != nil {
		t.Fatalf("--listen: exit %d, %v, %v\n%s", code, err1, err2, errs)
	}
	for _, v := range [][]byte{tok, sec} {
		if s := strings.TrimSpace(string(v)); len(s) < 32 || strings.Contains(errs, s) {
			t.Errorf("a secret of %d characters is printed:\n%s", len(s), errs)
		}
	}
	if fi, err := os.Stat(listen + ".secret"); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("secret file mode %v (%v)", fi.Mode(), err)
	}
	if !strings.Contains(errs, "--secret-file") {
		t.Errorf("the hint does not say how workers read the secret:\n%s", errs)
	}
}
