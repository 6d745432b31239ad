package keycast

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/loadproof/loadproof/internal/textclip"
	"slices"
	"strings"
)

// Permission is one policy rule (a permissions row: identifier + JSON
// config), with Keycast's CustomPermission semantics (docs/protocol-keycast.md,
// Policies and permissions).
type Permission interface {
	// Identifier is the permissions.identifier the rule was parsed from.
	Identifier() string
	// CanSign reports whether an event of this kind and content may be signed.
	CanSign(kind int, content string) bool
	// CanEncrypt reports whether user may encrypt plaintext to recipient.
	CanEncrypt(plaintext string, user, recipient PublicKey) bool
	// CanDecrypt reports whether user may decrypt ciphertext from sender.
	CanDecrypt(ciphertext string, sender, user PublicKey) bool
	// Display is the user-facing description used in PolicyInfo.
	Display() PermissionDisplay
}

// Permission identifiers Keycast knows. Any identifier that starts with
// IdentAllowedKinds is an allowed-kinds rule.
const (
	IdentAllowedKinds  = "allowed_kinds"
	IdentContentFilter = "content_filter"
	IdentDecryptOnly   = "decrypt_only"
	IdentEncryptToSelf = "encrypt_to_self"
	IdentFullAccess    = "full_access"
)

// NIP42AuthKind is the only kind decrypt_only lets a client sign.
const NIP42AuthKind = 22242

// ParsePermission builds the rule for a permissions row. Unknown identifiers
// and configs that do not parse give false: Keycast drops those silently on
// the RPC path.
func ParsePermission(identifier string, config []byte) (Permission, bool) {
	switch {
	case strings.HasPrefix(identifier, IdentAllowedKinds):
		var c struct {
			AllowedKinds *[]uint16 `json:"allowed_kinds"`
		}
		if !decodeConfig(config, &c) {
			return nil, false
		}
		p := &allowedKinds{ident: identifier}
		if c.AllowedKinds != nil {
			p.all = false
			p.kinds = slices.Clone(*c.AllowedKinds)
		} else {
			p.all = true
		}
		return p, true
	case identifier == IdentContentFilter:
		var c struct {
			BlockedWords *[]string `json:"blocked_words"`
		}
		if !decodeConfig(config, &c) {
			return nil, false
		}
		p := &contentFilter{}
		if c.BlockedWords != nil {
			p.words = slices.Clone(*c.BlockedWords)
			p.set = true
		}
		return p, true
	case identifier == IdentDecryptOnly:
		var c struct{}
		if !decodeConfig(config, &c) {
			return nil, false
		}
		return decryptOnly{}, true
	case identifier == IdentEncryptToSelf:
		return encryptToSelf{}, true
	case identifier == IdentFullAccess:
		return fullAccess{}, true
	}
	return nil, false
}

// decodeConfig decodes a JSON object config (serde: unknown fields ignored,
// null optional fields allowed). An empty config counts as {}.
func decodeConfig(config []byte, v any) bool {
	b := bytes.TrimSpace(config)
	if len(b) == 0 {
		b = []byte("{}")
	}
	if b[0] != '{' {
		return false
	}
	return json.Unmarshal(b, v) == nil
}

// AllowSign reports whether every rule allows signing (AND); an empty list
// means full access.
func AllowSign(perms []Permission, kind int, content string) bool {
	for _, p := range perms {
		if !p.CanSign(kind, content) {
			return false
		}
	}
	return true
}

// AllowEncrypt reports whether every rule allows user to encrypt plaintext
// to recipient.
func AllowEncrypt(perms []Permission, plaintext string, user, recipient PublicKey) bool {
	for _, p := range perms {
		if !p.CanEncrypt(plaintext, user, recipient) {
			return false
		}
	}
	return true
}

// AllowDecrypt reports whether every rule allows user to decrypt ciphertext
// from sender.
func AllowDecrypt(perms []Permission, ciphertext string, sender, user PublicKey) bool {
	for _, p := range perms {
		if !p.CanDecrypt(ciphertext, sender, user) {
			return false
		}
	}
	return true
}

type allowedKinds struct {
	ident string
	all   bool
	kinds []uint16
}

func (p *allowedKinds) Identifier() string { return p.ident }
func (p *allowedKinds) CanSign(kind int, _ string) bool {
	if p.all {
		return true
	}
	return kind >= 0 && kind <= MaxKind && slices.Contains(p.kinds, uint16(kind))
}
func (p *allowedKinds) CanEncrypt(string, PublicKey, PublicKey) bool { return true }
func (p *allowedKinds) CanDecrypt(string, PublicKey, PublicKey) bool { return true }

// kindAbility is Keycast's friendly name of a kind in the consent display.
func kindAbility(kind uint16) string {
	switch kind {
	case 0:
		return "Update your profile"
	case 1:
		return "Post notes"
	case 3:
		return "Manage your contact list"
	case 4, 44, 1059:
		return "Send and read private messages"
	case 7:
		return "React to posts"
	case 22:
		return "Upload videos"
	case 9735:
		return "Send zaps"
	case 10002:
		return "Set your relay list"
	case 10011:
		return "Update your linked accounts"
	case 30023:
		return "Write long-form articles"
	}
	return "Other actions"
}

func (p *allowedKinds) Display() PermissionDisplay {
	if p.all {
		return PermissionDisplay{Icon: "✏️", Title: "Full access", Description: "Can perform all actions on your behalf"}
	}
	var abilities []string
	isDM := func(k uint16) bool { return k == 4 || k == 44 || k == 1059 }
	if slices.ContainsFunc(p.kinds, isDM) {
		abilities = append(abilities, kindAbility(4))
	}
	for _, k := range p.kinds {
		if isDM(k) {
			continue
		}
		if a := kindAbility(k); !slices.Contains(abilities, a) {
			abilities = append(abilities, a)
		}
	}
	if len(abilities) == 0 {
		abilities = []string{"Limited actions"}
	}
	return PermissionDisplay{Icon: "✏️", Title: "What this app can do", Description: strings.Join(abilities, ", ")}
}

type contentFilter struct {
	set   bool
	words []string
}

func (p *contentFilter) Identifier() string { return IdentContentFilter }
func (p *contentFilter) blocked(s string) bool {
	for _, w := range p.words {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}
func (p *contentFilter) CanSign(_ int, content string) bool { return !p.blocked(content) }
func (p *contentFilter) CanEncrypt(plaintext string, _, _ PublicKey) bool {
	return !p.blocked(plaintext)
}
func (p *contentFilter) CanDecrypt(string, PublicKey, PublicKey) bool { return true }
func (p *contentFilter) Display() PermissionDisplay {
	if len(p.words) == 0 {
		return PermissionDisplay{Icon: "✅", Title: "No content restrictions", Description: "No blocked words or phrases"}
	}
	return PermissionDisplay{Icon: "🛡️", Title: "Content restrictions", Description: "Cannot post content containing: " + strings.Join(p.words, ", ")}
}

type decryptOnly struct{}

func (decryptOnly) Identifier() string                           { return IdentDecryptOnly }
func (decryptOnly) CanSign(kind int, _ string) bool              { return kind == NIP42AuthKind }
func (decryptOnly) CanEncrypt(string, PublicKey, PublicKey) bool { return false }
func (decryptOnly) CanDecrypt(string, PublicKey, PublicKey) bool { return true }
func (decryptOnly) Display() PermissionDisplay {
	return PermissionDisplay{Icon: "👁️", Title: "Read only", Description: "Can only read encrypted messages, cannot post or send messages"}
}

type encryptToSelf struct{}

func (encryptToSelf) Identifier() string       { return IdentEncryptToSelf }
func (encryptToSelf) CanSign(int, string) bool { return true }
func (encryptToSelf) CanEncrypt(_ string, user, recipient PublicKey) bool {
	return user == recipient
}
func (encryptToSelf) CanDecrypt(_ string, sender, user PublicKey) bool { return sender == user }
func (encryptToSelf) Display() PermissionDisplay {
	return PermissionDisplay{Icon: "🔒", Title: "Private message restriction", Description: "Can only send messages to yourself (for backups or notes)"}
}

type fullAccess struct{}

func (fullAccess) Identifier() string                           { return IdentFullAccess }
func (fullAccess) CanSign(int, string) bool                     { return true }
func (fullAccess) CanEncrypt(string, PublicKey, PublicKey) bool { return true }
func (fullAccess) CanDecrypt(string, PublicKey, PublicKey) bool { return true }
func (fullAccess) Display() PermissionDisplay {
	return PermissionDisplay{Icon: "🔓", Title: "Full access", Description: "Sign, encrypt, and decrypt anything without restrictions"}
}

// PermissionRow is a seeded permissions row.
type PermissionRow struct {
	Identifier string
	Config     string
}

// SeededPermissions are the permissions rows of Keycast's initial migration,
// in insertion order.
var SeededPermissions = []PermissionRow{
	{"allowed_kinds_social", `{"allowed_kinds": [0, 1, 3, 7, 9735]}`},
	{"allowed_kinds_messaging", `{"allowed_kinds": [4, 44, 1059]}`},
	{"allowed_kinds_zaps", `{"allowed_kinds": [9734]}`},
	{"allowed_kinds_lists", `{"allowed_kinds": [10000, 10001, 10002, 10003, 10004, 10005, 10006, 10007, 10015, 10030]}`},
	{"allowed_kinds_longform", `{"allowed_kinds": [30023, 30024, 30030, 30040, 30041, 30078, 30311, 30315, 30402, 30403]}`},
	{"allowed_kinds_wallet", `{"allowed_kinds": [23194, 23195]}`},
	{"allowed_kinds_deletion", `{"allowed_kinds": [5]}`},
	{"allowed_kinds_reports", `{"allowed_kinds": [1984]}`},
	{"allowed_kinds_social_messaging", `{"allowed_kinds": [0, 1, 3, 4, 7, 44, 1059, 9735, 22242]}`},
	{"decrypt_only", `{}`},
	{"full_access", `{}`},
}

// Policy is a seeded global policy and the identifiers of its permissions.
type Policy struct {
	Name        string
	Slug        string
	DisplayName string
	Description string
	Permissions []string // identifiers in SeededPermissions
}

// SeededPolicies are Keycast's four global policies, in insertion order.
var SeededPolicies = []Policy{
	{"Standard Social (Default)", "social", "Social App", "Post notes, reactions, and private messages", []string{"allowed_kinds_social_messaging"}},
	{"Read Only", "readonly", "Read Only", "Can only read encrypted messages and authenticate with relays. Cannot post, react, or send messages.", []string{"decrypt_only"}},
	{"Wallet Only", "wallet", "Wallet Only", "Wallet and payment operations only", []string{"allowed_kinds_zaps"}},
	{"Full Access", "full", "Full Access", "Sign, encrypt, and decrypt anything without restrictions", []string{"full_access"}},
}

// PolicyBySlug returns the seeded policy with that slug.
func PolicyBySlug(slug string) (Policy, bool) {
	for _, p := range SeededPolicies {
		if p.Slug == slug {
			return p, true
		}
	}
	return Policy{}, false
}

// SeededPermissionConfig returns the config of a seeded permission row.
func SeededPermissionConfig(identifier string) (string, bool) {
	for _, r := range SeededPermissions {
		if r.Identifier == identifier {
			return r.Config, true
		}
	}
	return "", false
}

// Rules parses the policy's permissions (dropping any that do not parse).
func (p Policy) Rules() []Permission {
	var out []Permission
	for _, id := range p.Permissions {
		cfg, ok := SeededPermissionConfig(id)
		if !ok {
			continue
		}
		if r, ok := ParsePermission(id, []byte(cfg)); ok {
			out = append(out, r)
		}
	}
	return out
}

// Info returns the PolicyInfo of the token response and GET /api/policies.
func (p Policy) Info() PolicyInfo {
	info := PolicyInfo{Slug: p.Slug, DisplayName: p.DisplayName, Description: p.Description, Permissions: []PermissionDisplay{}}
	for _, r := range p.Rules() {
		info.Permissions = append(info.Permissions, r.Display())
	}
	return info
}

// ParseScope returns the policy slug of an OAuth scope "policy:<slug>".
// Anything else is an error whose text is the 400 message detail.
func ParseScope(scope string) (string, error) {
	slug, ok := strings.CutPrefix(scope, "policy:")
	if !ok || slug == "" {
		return "", fmt.Errorf("Invalid scope %q: expected policy:<slug>", textclip.String(scope, 80))
	}
	return slug, nil
}
