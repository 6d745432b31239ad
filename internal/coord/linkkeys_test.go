package coord

import (
	"strings"
	"testing"
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

// TestSetLinkKeysSources (issue 25 section 3): a worker's own source range replaces the task's.
func TestSetLinkKeysSources(t *testing.T) {
	args := []string{"linkkeys", "worker", "--spec", `{"command":"connections","connections":{"target":{"addr":"127.0.0.1:1"},"sources":{"Base":2130706433,"Count":4}}}`}
	out, err := SetLinkKeysSources(args, "127.5.0.1", 9)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out[3], `"sources":{"Base":2131034113,"Count":9}`) {
		t.Errorf("spec after --client-ip-base: %s", out[3])
	}
	if _, err := SetLinkKeysSources([]string{"linkkeys", "worker", "--spec", `{"command":"combined","combined":{}}`}, "127.5.0.1", 9); err == nil {
		t.Error("a combined spec's source prefixes were rewritten")
	}
	if _, err := SetLinkKeysSources(args, "not-an-ip", 9); err == nil || !strings.Contains(err.Error(), "--client-ip-base") {
		t.Errorf("a bad base: %v", err)
	}
	if _, err := SetLinkKeysSources(args, "127.5.0.1", 0); err == nil {
		t.Error("a count of 0 was taken")
	}
	if got, err := SetLinkKeysSources(lkTask[:2], "127.5.0.1", 9); err != nil || len(got) != 2 {
		t.Errorf("another task: %q %v", got, err)
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
		out, err := SetLinkKeysSources(args, "127.5.0.1", 3)
		if err == nil && (len(out) != 4 || strings.Contains(out[3], `"combined":{`)) {
			t.Fatalf("sources set on %q: %q", spec, out)
		}
	})
}
