package keycast

import (
	"encoding/json"
	"testing"
)

func TestMethods(t *testing.T) {
	tests := []struct {
		cli, rpc, debug string
	}{
		{"sign-event", "sign_event", "SignEvent"},
		{"get-public-key", "get_public_key", "GetPublicKey"},
		{"nip44-encrypt", "nip44_encrypt", "Nip44Encrypt"},
		{"register", "", "Register"},
	}
	if len(Methods) != len(tests) {
		t.Fatalf("%d methods", len(Methods))
	}
	for i, tc := range tests {
		m, err := ParseMethod(tc.cli)
		if err != nil || m != Methods[i] {
			t.Fatalf("ParseMethod(%q) = %q, %v", tc.cli, m, err)
		}
		if m.RPCName() != tc.rpc || m.DebugName() != tc.debug || m.IsRPC() != (tc.rpc != "") {
			t.Fatalf("%s: rpc %q debug %q", m, m.RPCName(), m.DebugName())
		}
		if back, err := MethodFromDebugName(tc.debug); err != nil || back != m {
			t.Fatalf("MethodFromDebugName(%q) = %q, %v", tc.debug, back, err)
		}
	}
	for _, bad := range []string{"", "SignEvent", "sign_event", "nip04-encrypt"} {
		if _, err := ParseMethod(bad); err == nil {
			t.Errorf("ParseMethod(%q) accepted", bad)
		}
	}
	var plan struct {
		M Method   `json:"method"`
		S Scenario `json:"scenario"`
	}
	if err := json.Unmarshal([]byte(`{"method":"nip44-encrypt","scenario":"cold-start"}`), &plan); err != nil || plan.M != MethodNIP44Encrypt || plan.S != ScenarioColdStart {
		t.Fatalf("plan JSON: %+v %v", plan, err)
	}
	if err := json.Unmarshal([]byte(`{"method":"Nip44Encrypt"}`), &plan); err == nil {
		t.Fatal("debug name accepted in plan JSON")
	}
	b, _ := json.Marshal(plan)
	if string(b) != `{"method":"nip44-encrypt","scenario":"cold-start"}` {
		t.Fatalf("marshal %s", b)
	}
	if _, err := json.Marshal(struct{ M Method }{"bogus"}); err == nil {
		t.Fatal("unknown method marshalled")
	}
}

func TestScenarios(t *testing.T) {
	want := map[string]string{"warm-cache": "WarmCache", "cold-start": "ColdStart", "mixed": "Mixed"}
	for _, s := range Scenarios {
		if want[string(s)] != s.DebugName() {
			t.Fatalf("%s debug %s", s, s.DebugName())
		}
		p, err := ParseScenario(string(s))
		if err != nil || p != s {
			t.Fatal(err)
		}
		if back, err := ScenarioFromDebugName(s.DebugName()); err != nil || back != s {
			t.Fatal(err)
		}
	}
	if _, err := ParseScenario("warm"); err == nil {
		t.Fatal("bad scenario accepted")
	}
}
