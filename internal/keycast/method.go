package keycast

import (
	"fmt"
	"strings"
)

// Method is a load-test method, spelled as on the CLI and in plan JSON
// (kebab-case).
type Method string

// The four methods of the load tool.
const (
	MethodSignEvent    Method = "sign-event"
	MethodGetPublicKey Method = "get-public-key"
	MethodNIP44Encrypt Method = "nip44-encrypt"
	MethodRegister     Method = "register"
)

// Methods lists the methods in CLI order.
var Methods = []Method{MethodSignEvent, MethodGetPublicKey, MethodNIP44Encrypt, MethodRegister}

var methodInfo = map[Method]struct{ rpc, debug string }{
	MethodSignEvent:    {RPCSignEvent, "SignEvent"},
	MethodGetPublicKey: {RPCGetPublicKey, "GetPublicKey"},
	MethodNIP44Encrypt: {RPCNIP44Encrypt, "Nip44Encrypt"},
	MethodRegister:     {"", "Register"},
}

// ParseMethod parses a kebab-case method name.
func ParseMethod(s string) (Method, error) {
	m := Method(s)
	if _, ok := methodInfo[m]; !ok {
		return "", fmt.Errorf("keycast: unknown method %q; want one of %s", s, joinMethods())
	}
	return m, nil
}

// MethodFromDebugName parses the Rust Debug spelling used in results
// metadata ("SignEvent", …).
func MethodFromDebugName(s string) (Method, error) {
	for m, info := range methodInfo {
		if info.debug == s {
			return m, nil
		}
	}
	return "", fmt.Errorf("keycast: unknown method name %q; want SignEvent, GetPublicKey, Nip44Encrypt or Register", s)
}

func joinMethods() string {
	names := make([]string, len(Methods))
	for i, m := range Methods {
		names[i] = string(m)
	}
	return strings.Join(names, ", ")
}

// RPCName is the /api/nostr method name; "" for register, which is not an RPC.
func (m Method) RPCName() string { return methodInfo[m].rpc }

// DebugName is the Rust Debug spelling written to results metadata.
func (m Method) DebugName() string { return methodInfo[m].debug }

// IsRPC reports whether m is sent to /api/nostr.
func (m Method) IsRPC() bool { return m.RPCName() != "" }

// String returns the kebab-case name.
func (m Method) String() string { return string(m) }

// MarshalText writes the kebab-case name.
func (m Method) MarshalText() ([]byte, error) {
	if _, ok := methodInfo[m]; !ok {
		return nil, fmt.Errorf("keycast: cannot encode unknown method %q", string(m))
	}
	return []byte(m), nil
}

// UnmarshalText parses the kebab-case name.
func (m *Method) UnmarshalText(b []byte) error {
	v, err := ParseMethod(string(b))
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// Scenario is a user-selection scenario, kebab-case.
type Scenario string

// The three scenarios.
const (
	ScenarioWarmCache Scenario = "warm-cache"
	ScenarioColdStart Scenario = "cold-start"
	ScenarioMixed     Scenario = "mixed"
)

// Scenarios lists the scenarios in CLI order.
var Scenarios = []Scenario{ScenarioWarmCache, ScenarioColdStart, ScenarioMixed}

var scenarioDebug = map[Scenario]string{
	ScenarioWarmCache: "WarmCache",
	ScenarioColdStart: "ColdStart",
	ScenarioMixed:     "Mixed",
}

// ParseScenario parses a kebab-case scenario name.
func ParseScenario(s string) (Scenario, error) {
	sc := Scenario(s)
	if _, ok := scenarioDebug[sc]; !ok {
		return "", fmt.Errorf("keycast: unknown scenario %q; want warm-cache, cold-start or mixed", s)
	}
	return sc, nil
}

// ScenarioFromDebugName parses the Rust Debug spelling ("WarmCache", …).
func ScenarioFromDebugName(s string) (Scenario, error) {
	for sc, d := range scenarioDebug {
		if d == s {
			return sc, nil
		}
	}
	return "", fmt.Errorf("keycast: unknown scenario name %q; want WarmCache, ColdStart or Mixed", s)
}

// DebugName is the Rust Debug spelling written to results metadata.
func (s Scenario) DebugName() string { return scenarioDebug[s] }

// String returns the kebab-case name.
func (s Scenario) String() string { return string(s) }

// MarshalText writes the kebab-case name.
func (s Scenario) MarshalText() ([]byte, error) {
	if _, ok := scenarioDebug[s]; !ok {
		return nil, fmt.Errorf("keycast: cannot encode unknown scenario %q", string(s))
	}
	return []byte(s), nil
}

// UnmarshalText parses the kebab-case name.
func (s *Scenario) UnmarshalText(b []byte) error {
	v, err := ParseScenario(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}
