package cli

import (
	"strings"
	"testing"
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
	out, err := setSources(args, "127.5.0.1", 9)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out[3], `"sources":{"Base":2131034113,"Count":9}`) {
		t.Errorf("spec after --client-ip-base: %s", out[3])
	}
	if _, err := setSources([]string{"linkkeys", "worker", "--spec", `{"command":"combined","combined":{}}`}, "127.5.0.1", 9); err == nil {
		t.Error("a combined spec's source prefixes were rewritten")
	}
	if got, err := setSources([]string{"keycast", "run", "--url", "http://x"}, "127.5.0.1", 9); err != nil || len(got) != 4 {
		t.Errorf("keycast task: %q %v", got, err)
	}
}
