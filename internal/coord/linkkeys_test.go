package coord

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"

	"github.com/loadproof/loadproof/internal/linkkeysload"
	"github.com/loadproof/loadproof/internal/result"
)

// TestLinkKeysTargets (finding 1): a LinkKeys task's spec is authorized by the one section it
// runs: two sections are refused, a combined target is checked like the others, and the
// server_metrics location is among the things the worker authorizes.
func TestLinkKeysTargets(t *testing.T) {
	for _, c := range []struct {
		name, spec string
		want       []string
		bad        string
	}{
		{"two sections", `{"command":"connections","connections":{"target":{"addr":"127.0.0.1:1"}},"requests":{"target":{"addr":"198.18.0.9:2"}}}`, nil, "2 sections (connections, requests)"},
		{"combined", `{"command":"combined","combined":{"target":{"addr":"198.18.0.9:2"}}}`, []string{"tcp://198.18.0.9:2"}, ""},
		{"metrics", `{"command":"ddos","server_metrics":"http://198.18.0.9/metrics","ddos":{"target":{"addr":"127.0.0.1:7"}}}`, []string{"tcp://127.0.0.1:7", "http://198.18.0.9/metrics"}, ""},
		{"none", `{"command":"ddos"}`, nil, "names no target"},
		{"not json", `{`, nil, "not JSON"},
	} {
		got, err := LinkKeysTargets([]string{"linkkeys", "worker", "--spec", c.spec})
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
	if _, err := LinkKeysTargets([]string{"linkkeys", "worker", "--spec", "{}", "--spec", "{}"}); err == nil {
		t.Error("a task with two specs was read")
	}
}

// TestSetLinkKeysSources (issue 25 section 3): a worker's own source range replaces the task's,
// a ddos segment starts at the worker's first address, and the addresses a segment will use are
// checked on this machine before the task is taken.
func TestSetLinkKeysSources(t *testing.T) {
	WorkerBind = func(linkkeysload.IPv4) error { return nil }
	t.Cleanup(func() { WorkerBind = nil })
	args := []string{"linkkeys", "worker", "--spec", `{"command":"connections","connections":{"target":{"addr":"127.0.0.1:1"},"sources":{"Base":2130706433,"Count":4}}}`}
	out, err := SetLinkKeysSources(args, result.Whole, "127.5.0.1", 9)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out[3], `"sources":{"Base":2131034113,"Count":9}`) {
		t.Errorf("spec after --client-ip-base: %s", out[3])
	}
	if _, err := SetLinkKeysSources([]string{"linkkeys", "worker", "--spec", `{"command":"combined","combined":{}}`}, result.Whole, "127.5.0.1", 9); err == nil {
		t.Error("a combined spec's source prefixes were rewritten")
	}
	if _, err := SetLinkKeysSources(args, result.Whole, "not-an-ip", 9); err == nil || !strings.Contains(err.Error(), "--client-ip-base") {
		t.Errorf("a bad base: %v", err)
	}
	if _, err := SetLinkKeysSources(args, result.Whole, "127.5.0.1", 0); err == nil {
		t.Error("a count of 0 was taken")
	}
	if got, err := SetLinkKeysSources(lkTask[:2], result.Whole, "127.5.0.1", 9); err != nil || len(got) != 2 {
		t.Errorf("another task: %q %v", got, err)
	}
	// ddos: one attempt per source numbered across the run; segment 3 of 3 of 300 sources starts at
	// this worker's own first address and stays inside its 100 addresses.
	ddos := []string{"linkkeys", "worker", "--spec", `{"command":"ddos","segment":{"index":0,"count":1},"ddos":{"target":{"addr":"127.0.0.1:1"},"sources":300,"client_ip_base":2131034112}}`}
	WorkerBind = func(a linkkeysload.IPv4) error { // this test's machine holds 198.19.5.0/24 only
		if strings.HasPrefix(a.String(), "198.19.5.") {
			return nil
		}
		return syscall.EADDRNOTAVAIL
	}
	out, err = SetLinkKeysSources(ddos, result.Segment{Index: 2, Count: 3}, "198.19.5.1", 100)
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
	out, err = SetLinkKeysSources(ddos, result.Segment{Index: 2, Count: 3}, "192.0.2.1", 100)
	if err == nil || !strings.Contains(err.Error(), "cannot bind source address 192.0.2.1") || !strings.Contains(err.Error(), "ip route add local") {
		t.Errorf("a worker block this machine does not hold: %q %v, want a refusal naming the address and the route command", out, err)
	}
	// Without --client-ip-base the task's own range is checked on this machine, segment by segment,
	// and the arguments pass unchanged: here the third of 198.19.4.0+300 is 198.19.4.200+100, of
	// which this machine holds none.
	own := []string{"linkkeys", "worker", "--spec", `{"command":"ddos","segment":{"index":0,"count":1},"ddos":{"target":{"addr":"198.18.0.1:1"},"sources":300,"client_ip_base":3323134976}}`}
	if _, err = SetLinkKeysSources(own, result.Segment{Index: 2, Count: 3}, "", 0); err == nil || !strings.Contains(err.Error(), "cannot bind source address 198.19.4.200") {
		t.Errorf("a task range this worker does not hold: %v, want a refusal naming 198.19.4.200", err)
	}
	if got, err := SetLinkKeysSources(own, result.Segment{Index: 0, Count: 3}, "", 0); err == nil {
		t.Errorf("segment 1/3 of 198.19.4.0+300 (198.19.4.0+100) passed on this machine: %q", got)
	}
	WorkerBind = func(linkkeysload.IPv4) error { return nil }
	if got, err := SetLinkKeysSources(own, result.Segment{Index: 2, Count: 3}, "", 0); err != nil || strings.Join(got, " ") != strings.Join(own, " ") {
		t.Errorf("a task range this worker holds: %q %v, want the arguments unchanged", got, err)
	}
	if _, err := SetLinkKeysSources(ddos, result.Segment{Index: 2, Count: 3}, "198.19.5.1", 99); err == nil || !strings.Contains(err.Error(), "--client-ip-count is 99") {
		t.Errorf("a ddos segment of 100 attempts on 99 addresses: %v, want a refusal naming --client-ip-count", err)
	}
}

// FuzzLinkKeysTargets: any spec is refused or yields its one section's TCP address first, then at
// most its metrics location; the source override of an accepted spec never takes a combined one.
func FuzzLinkKeysTargets(f *testing.F) {
	f.Add(`{"command":"ddos","server_metrics":"http://198.18.0.9/metrics","ddos":{"target":{"addr":"127.0.0.1:7"}}}`)
	f.Add(`{"command":"connections","connections":{"target":{"addr":"127.0.0.1:1"}},"requests":{"target":{"addr":"198.18.0.9:2"}}}`)
	f.Add(`{"command":"combined","combined":{"target":{"addr":"[::1]:2"}}}`)
	f.Add(`{"requests":{"target":{"addr":""}}}`)
	f.Fuzz(func(t *testing.T, spec string) {
		args := []string{"linkkeys", "worker", "--spec", spec}
		got, err := LinkKeysTargets(args)
		if err != nil {
			return // the worker refuses the task before the override
		}
		if len(got) < 1 || len(got) > 2 || !strings.HasPrefix(got[0], "tcp://") {
			t.Fatalf("targets %q of %q", got, spec)
		}
		out, err := SetLinkKeysSources(args, result.Whole, "127.5.0.1", 3)
		if err == nil && (len(out) != 4 || strings.Contains(out[3], `"combined":{`)) {
			t.Fatalf("sources set on %q: %q", spec, out)
		}
	})
}
