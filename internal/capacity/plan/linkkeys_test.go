package plan

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/loadproof/loadproof/internal/hostrule"
)

const linkKeysExamplePath = "../../../docs/linkkeys-capacity-plan.example.json"

func TestLinkKeysExamplePlanRoundTrips(t *testing.T) {
	p, err := ReadLinkKeysPlan(linkKeysExamplePath)
	if err != nil {
		t.Fatal(err)
	}
	if env, err := ValidateLinkKeys(p, LinkKeysValidateOptions{}); err != nil || env != EnvLocal {
		t.Fatalf("env %q: %v", env, err)
	}
	if len(p.Phases) != 5 || p.Phases[4].Kind() != "combined" || p.Phases[0].Kind() != StreamKindHeld || p.Phases[3].ExpectedShedding == nil {
		t.Fatalf("example: %d phases", len(p.Phases))
	}
	b, err := p.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseLinkKeysPlan(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, p) {
		t.Fatalf("round trip changed the plan:\n%s", b)
	}
}

// mutateLinkKeys decodes the example plan into generic maps, applies f and re-encodes it.
func mutateLinkKeys(t *testing.T, f func(m map[string]any)) []byte {
	t.Helper()
	p, err := ReadLinkKeysPlan(linkKeysExamplePath)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(p)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func phaseMap(m map[string]any, i int) map[string]any { return m["phases"].([]any)[i].(map[string]any) }

func TestParseLinkKeysPlanReportsEveryProblem(t *testing.T) {
	b := mutateLinkKeys(t, func(m map[string]any) {
		m["extra"] = 1
		delete(m, "target")
		ph := phaseMap(m, 0)
		ph["duration_seconds"] = -3
		ph["workload"].(map[string]any)["held"].(map[string]any)["count"] = "many"
		ph["workload"].(map[string]any)["bogus"] = true
		phaseMap(m, 1)["checks"] = map[string]any{}
	})
	_, err := ParseLinkKeysPlan(b)
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v", err)
	}
	for _, want := range []string{`extra: unknown field "extra"`, `target: missing field "target"`, "phases[0].duration_seconds: expected a non-negative integer, found -3",
		"phases[0].workload.held.count: expected a non-negative integer, found a string", `phases[0].workload.bogus: unknown field "bogus"`,
		"phases[1].checks: expected an array, found an object"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	for _, bad := range []string{`{"phases": [] } {}`, "\xff", `[`, `{"environment_profiles": {"a": {"variables": {}}, "a": {"variables": {}}}}`} {
		if _, err := ParseLinkKeysPlan([]byte(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func TestValidateLinkKeysReportsEveryProblem(t *testing.T) {
	b := mutateLinkKeys(t, func(m map[string]any) {
		m["profile_name"] = " "
		m["target"] = map[string]any{"mode": "running"}
		profs := m["environment_profiles"].(map[string]any)
		profs["default"].(map[string]any)["variables"] = map[string]any{"TCP_PORT": "4987", "TCP_NOPE": "1", "TCP_MAX_CONNECTIONS": "a b"}
		m["stop_conditions"].(map[string]any)["max_request_error_rate"] = 2
		ph := phaseMap(m, 0)
		ph["harness"] = "keycast"
		ph["environment_profile"] = "missing"
		w := ph["workload"].(map[string]any)
		w["handshakes"] = map[string]any{"concurrency": 1, "client_ip_base": "127.0.1.32", "client_ip_count": 8}
		w["ddos"] = []any{map[string]any{"name": "held", "sources": 10, "concurrency": 1, "client_ip_base": "10.0.0.1"}}
		ph["checks"] = []any{map[string]any{"metric": "held.nope", "comparison": "at-least", "limit": 1},
			map[string]any{"metric": "requests.rate", "comparison": "more", "limit": 1}}
		ph["expected_shedding"] = map[string]any{"stream": "nope", "reasons": []any{"global", "global", "rude"}, "exact_accounting": true}
		profs["default"].(map[string]any)["variables"].(map[string]any)["TCP_SOURCE_PREFIXES"] = "held=127.0.1.0/24"
	})
	p, err := ParseLinkKeysPlan(b)
	if err != nil {
		t.Fatal(err)
	}
	_, err = ValidateLinkKeys(p, LinkKeysValidateOptions{})
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"profile_name must not be empty", "target mode running needs info_file",
		"TCP_PORT cannot be set in a profile", `unknown variable "TCP_NOPE"`, "TCP_MAX_CONNECTIONS must be a non-empty value of printable ASCII without spaces",
		"stop_conditions.max_request_error_rate must be between 0 and 1", `names harness "keycast"`, `names environment profile "missing"`,
		"streams held and handshakes share source addresses", "client_ip_base 10.0.0.1 is outside 127.0.0.0/8", `ddos wave name "held" must be unique`,
		`check metric "held.nope": a held stream has no figure "nope"`, `check metric "requests.rate" must be <stream>.<figure> with a stream of this phase`,
		`check comparison must be at-least or at-most (got "more")`, `expected_shedding.stream "nope" must be a stream of this phase (held, handshakes, held) or server`,
		"TCP_SOURCE_PREFIXES cannot be set in a profile: the harness sets it for each phase",
		`expected_shedding.reasons: "global" is not one of`, `expected_shedding.reasons: "rude" is not one of`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("validation lacks %q", want)
		}
	}
	if n := len(Problems(err)); n < 17 {
		t.Errorf("%d problems:\n%v", n, err)
	}
}

func TestValidateLinkKeysAsksTheServer(t *testing.T) {
	p, err := ReadLinkKeysPlan(linkKeysExamplePath)
	if err != nil {
		t.Fatal(err)
	}
	_, err = ValidateLinkKeys(p, LinkKeysValidateOptions{ServerConfigLine: func(vars map[string]string) (string, error) {
		if vars["TCP_MAX_CONNECTIONS"] != "" {
			return "", errors.New("TCP_MAX_CONNECTIONS is not to the server's taste")
		}
		return "config: ok", nil
	}})
	if err == nil || !strings.Contains(err.Error(), "the reference server refuses these variables: TCP_MAX_CONNECTIONS is not to the server's taste") {
		t.Fatalf("%v", err)
	}
}

// TestLinkKeysRemoteTarget: a remote target names the server by addr, fingerprint, domain and an
// optional metrics URL, each checked, with the host rules on both addresses; its source ranges may
// leave 127.0.0.0/8. Parsing is strict about the target's members.
func TestLinkKeysRemoteTarget(t *testing.T) {
	fp := strings.Repeat("ab", 32)
	remote := func(target map[string]any, base string) []byte {
		return mutateLinkKeys(t, func(m map[string]any) {
			m["target"] = target
			for i := range m["phases"].([]any) {
				if h, ok := phaseMap(m, i)["workload"].(map[string]any)["held"].(map[string]any); ok && base != "" {
					h["client_ip_base"] = base
				}
			}
		})
	}
	good := map[string]any{"mode": "remote", "addr": "198.18.0.1:4433", "fingerprint": fp, "domain": "loadtest.local", "metrics_url": "http://198.18.0.1:9100/metrics"}
	p, err := ParseLinkKeysPlan(remote(good, "198.18.1.0"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Target.Addr != "198.18.0.1:4433" || p.Target.MetricsURL != "http://198.18.0.1:9100/metrics" {
		t.Fatalf("target %+v", p.Target)
	}
	if _, err := ValidateLinkKeys(p, LinkKeysValidateOptions{Rules: hostrule.Rules{AllowHost: "198.18.0.1"}}); err != nil {
		t.Fatalf("a remote target with its --allow-host: %v", err)
	}
	_, err = ValidateLinkKeys(p, LinkKeysValidateOptions{})
	for _, want := range []string{"target.addr 198.18.0.1:4433: hostrule: target not allowed: non-local target 198.18.0.1 needs the exact --allow-host 198.18.0.1",
		"target.metrics_url http://198.18.0.1:9100/metrics: hostrule: target not allowed"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("without --allow-host: %v; want %q", err, want)
		}
	}
	bad := map[string]any{"mode": "remote", "addr": "198.18.0.1", "fingerprint": "AB", "domain": "", "metrics_url": "ftp://198.18.0.1/metrics", "info_file": "x"}
	p, err = ParseLinkKeysPlan(remote(bad, ""))
	if err != nil {
		t.Fatal(err)
	}
	_, err = ValidateLinkKeys(p, LinkKeysValidateOptions{Rules: hostrule.Rules{AllowHost: "198.18.0.1"}})
	for _, want := range []string{`target.addr "198.18.0.1" must be HOST:PORT`, "target.fingerprint must be the server key's SHA-256 as 64 lowercase hex characters",
		`target.domain "" must be the server's domain name`, `target.metrics_url "ftp://198.18.0.1/metrics" must be an http(s)://HOST:PORT/metrics URL`,
		"target mode remote takes no info_file or server_log"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("validation lacks %q:\n%v", want, err)
		}
	}
	// Loopback targets need no flag; start mode refuses the remote fields; the sources of a
	// start plan stay inside 127.0.0.0/8.
	p, _ = ParseLinkKeysPlan(remote(map[string]any{"mode": "remote", "addr": "127.0.0.1:4433", "fingerprint": fp, "domain": "d"}, ""))
	if _, err := ValidateLinkKeys(p, LinkKeysValidateOptions{}); err != nil {
		t.Errorf("a loopback remote target without metrics_url: %v", err)
	}
	p, _ = ParseLinkKeysPlan(remote(map[string]any{"mode": "start", "addr": "127.0.0.1:4433"}, "198.18.1.0"))
	_, err = ValidateLinkKeys(p, LinkKeysValidateOptions{})
	if err == nil || !strings.Contains(err.Error(), "target mode start takes no info_file, server_log, addr") || !strings.Contains(err.Error(), "client_ip_base 198.18.1.0 is outside 127.0.0.0/8") {
		t.Errorf("start with remote fields: %v", err)
	}
	// Strict parsing: wrong types and unknown members of the target are named.
	_, err = ParseLinkKeysPlan(remote(map[string]any{"mode": "remote", "addr": 4433, "fingerprint": fp, "domain": "d", "metrics": "x"}, ""))
	if err == nil || !strings.Contains(err.Error(), "target.addr: expected a string, found a number") || !strings.Contains(err.Error(), `target.metrics: unknown field "metrics"`) {
		t.Errorf("parse: %v", err)
	}
}

func FuzzParseLinkKeysPlan(f *testing.F) {
	small := `{"profile_name":"p","revisions":{"code":"c","image":"i","infrastructure":"x"},"environment_parity":"e",` +
		`"target":{"mode":"start"},"environment_profiles":{"s":{"processes":2,"variables":{"TCP_HANDSHAKE_BURST":"5"}}},` +
		`"stop_conditions":{"max_server_rss_bytes":1,"max_handshake_failure_rate":0,"max_request_error_rate":0},` +
		`"phases":[{"name":"a","harness":"linkkeys","environment_profile":"s","duration_seconds":1,` +
		`"workload":{"held":{"count":1,"concurrency":1,"client_ip_base":"127.0.1.0","client_ip_count":1},` +
		`"ddos":[{"sources":2,"concurrency":1,"client_ip_base":"127.5.0.0"}]},` +
		`"checks":[{"metric":"held.established","comparison":"at-least","limit":1}],` +
		`"expected_shedding":{"stream":"ddos-1","reasons":["global"],"exact_accounting":true}}]}`
	f.Add([]byte(small))
	f.Add([]byte(`{"phases":[{"workload":{"ddos":[]}}]}`))
	f.Add([]byte(`{"environment_profiles":{"a":{"variables":{"x":1}}}}`))
	f.Add([]byte(`{"target":{"mode":"running","info_file":"","server_log":null}}`))
	f.Add([]byte(strings.Replace(small, `"target":{"mode":"start"}`, `"target":{"mode":"remote","addr":"198.18.0.1:4433","fingerprint":"`+
		strings.Repeat("ab", 32)+`","domain":"loadtest.local","metrics_url":"http://198.18.0.1:9100/metrics"}`, 1)))
	f.Add([]byte(`{"target":{"mode":"remote","addr":"[::1]:1","fingerprint":7,"domain":null,"metrics_url":"ftp://x","Addr":"y"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParseLinkKeysPlan(b)
		if err != nil {
			if p != nil || err.Error() == "" {
				t.Fatal("plan returned with an error, or an empty error")
			}
			return
		}
		_, _ = ValidateLinkKeys(p, LinkKeysValidateOptions{})
		b2, err := p.Encode()
		if err != nil {
			t.Fatalf("accepted plan does not encode: %v", err)
		}
		p2, err := ParseLinkKeysPlan(b2)
		if err != nil {
			t.Fatalf("encoded plan does not parse: %v\n%s", err, b2)
		}
		if !reflect.DeepEqual(p, p2) {
			t.Fatalf("round trip changed the plan:\n%#v\n%#v", p, p2)
		}
	})
}
