package keycast

import (
	"encoding/json"
	"testing"
)

func TestParsePermission(t *testing.T) {
	self := MustGenerateSecretKey().Public()
	other := MustGenerateSecretKey().Public()
	type check struct {
		kind      int
		content   string
		sign      bool
		encSelf   bool
		encOther  bool
		decOther  bool
		decSelf   bool
		plaintext string
	}
	tests := []struct {
		name, ident, config string
		ok                  bool
		checks              []check
	}{
		{"social messaging", "allowed_kinds_social_messaging", `{"allowed_kinds":[0,1,3,4,7,44,1059,9735,22242]}`, true, []check{
			{kind: 1, sign: true, encSelf: true, encOther: true, decOther: true, decSelf: true},
			{kind: 30023, sign: false, encSelf: true, encOther: true, decOther: true, decSelf: true},
		}},
		{"allowed_kinds exact", "allowed_kinds", `{"allowed_kinds":[9734]}`, true, []check{{kind: 9734, sign: true, encSelf: true, encOther: true, decOther: true, decSelf: true}, {kind: 1, sign: false, encSelf: true, encOther: true, decOther: true, decSelf: true}}},
		{"allowed_kinds null = all", "allowed_kinds_x", `{"allowed_kinds":null}`, true, []check{{kind: 40000, sign: true, encSelf: true, encOther: true, decOther: true, decSelf: true}}},
		{"allowed_kinds missing = all", "allowed_kinds_x", `{}`, true, []check{{kind: 5, sign: true, encSelf: true, encOther: true, decOther: true, decSelf: true}}},
		{"allowed_kinds bad config", "allowed_kinds_x", `{"allowed_kinds":[70000]}`, false, nil},
		{"allowed_kinds not object", "allowed_kinds_x", `[1]`, false, nil},
		{"content filter", "content_filter", `{"blocked_words":["spam"]}`, true, []check{
			{kind: 1, content: "buy spam now", sign: false, plaintext: "spam", encSelf: false, encOther: false, decOther: true, decSelf: true},
			{kind: 1, content: "hello", sign: true, plaintext: "hi", encSelf: true, encOther: true, decOther: true, decSelf: true},
		}},
		{"decrypt only", "decrypt_only", `{}`, true, []check{
			{kind: 22242, sign: true, encSelf: false, encOther: false, decOther: true, decSelf: true},
			{kind: 1, sign: false, encSelf: false, encOther: false, decOther: true, decSelf: true},
		}},
		{"decrypt only bad config", "decrypt_only", `"x"`, false, nil},
		{"encrypt to self", "encrypt_to_self", `{}`, true, []check{{kind: 1, sign: true, encSelf: true, encOther: false, decOther: false, decSelf: true}}},
		{"full access", "full_access", `garbage is ignored`, true, []check{{kind: 1, sign: true, encSelf: true, encOther: true, decOther: true, decSelf: true}}},
		{"unknown", "admin_everything", `{}`, false, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, ok := ParsePermission(tc.ident, []byte(tc.config))
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			if p.Identifier() != tc.ident && !(tc.ident == "allowed_kinds" && p.Identifier() == "allowed_kinds") {
				t.Fatalf("identifier %q", p.Identifier())
			}
			if d := p.Display(); d.Title == "" || d.Icon == "" {
				t.Fatalf("display %+v", d)
			}
			for i, c := range tc.checks {
				if got := p.CanSign(c.kind, c.content); got != c.sign {
					t.Errorf("check %d: CanSign = %v", i, got)
				}
				if got := p.CanEncrypt(c.plaintext, self, self); got != c.encSelf {
					t.Errorf("check %d: CanEncrypt(self) = %v", i, got)
				}
				if got := p.CanEncrypt(c.plaintext, self, other); got != c.encOther {
					t.Errorf("check %d: CanEncrypt(other) = %v", i, got)
				}
				if got := p.CanDecrypt("ct", other, self); got != c.decOther {
					t.Errorf("check %d: CanDecrypt(from other) = %v", i, got)
				}
				if got := p.CanDecrypt("ct", self, self); got != c.decSelf {
					t.Errorf("check %d: CanDecrypt(from self) = %v", i, got)
				}
			}
		})
	}
}

func TestAllowAND(t *testing.T) {
	u, r := MustGenerateSecretKey().Public(), MustGenerateSecretKey().Public()
	if !AllowSign(nil, 12345, "x") || !AllowEncrypt(nil, "x", u, r) || !AllowDecrypt(nil, "x", r, u) {
		t.Fatal("empty list must mean full access")
	}
	social, _ := PolicyBySlug("social")
	rules := social.Rules()
	if len(rules) != 1 {
		t.Fatalf("social has %d rules", len(rules))
	}
	// The load tool's operations pass under policy:social.
	if !AllowSign(rules, 1, "Load test 1") || !AllowEncrypt(rules, NIP44TestPlaintext, u, r) {
		t.Fatal("social policy blocks the load tool")
	}
	cf, _ := ParsePermission("content_filter", []byte(`{"blocked_words":["Load"]}`))
	both := append(rules, cf)
	if AllowSign(both, 1, "Load test 1") {
		t.Fatal("AND semantics broken: a blocking rule was ignored")
	}
	ro, _ := PolicyBySlug("readonly")
	if AllowEncrypt(ro.Rules(), "x", u, r) || !AllowDecrypt(ro.Rules(), "x", r, u) || AllowSign(ro.Rules(), 1, "") {
		t.Fatal("readonly semantics")
	}
}

func TestSeededPolicies(t *testing.T) {
	wantSlugs := []string{"social", "readonly", "wallet", "full"}
	if len(SeededPolicies) != len(wantSlugs) {
		t.Fatalf("%d policies", len(SeededPolicies))
	}
	var infos []PolicyInfo
	for i, p := range SeededPolicies {
		if p.Slug != wantSlugs[i] {
			t.Fatalf("policy %d slug %s", i, p.Slug)
		}
		if len(p.Rules()) != len(p.Permissions) {
			t.Fatalf("%s: a seeded permission does not parse", p.Slug)
		}
		infos = append(infos, p.Info())
	}
	for _, r := range SeededPermissions {
		if _, ok := ParsePermission(r.Identifier, []byte(r.Config)); !ok {
			t.Fatalf("seeded permission %s does not parse", r.Identifier)
		}
	}
	b, _ := json.MarshalIndent(infos, "", "  ")
	golden(t, "policies.golden.json", append(b, '\n'))
	if _, ok := PolicyBySlug("nope"); ok {
		t.Fatal("unknown slug found")
	}
	for scope, want := range map[string]string{"policy:social": "social", "policy:": "", "social": "", "": ""} {
		got, err := ParseScope(scope)
		if got != want || (err == nil) != (want != "") {
			t.Errorf("ParseScope(%q) = %q, %v", scope, got, err)
		}
	}
}
