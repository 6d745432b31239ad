package result

import (
	"net/url"
	"sort"
	"strings"
)

// Redacted replaces a flag value that must not reach a results file.
const Redacted = "(redacted)"

// RedactFlag returns the value a results file records for flag name (Envelope.Flags): results files
// are shared and every report (the dashboard's too) shows every flag, so a set token, secret,
// password or header flag is Redacted, and the --remote-write URL loses its user part, query and
// fragment, which may carry a token. Other values are kept as they are.
func RedactFlag(name, value string) string {
	switch {
	case value == "" || value == "[]":
		return value
	case secretFlagName(name):
		return Redacted
	case name == "remote-write":
		return redactURL(value)
	}
	return value
}

// secretFlagName reports a flag whose value must not reach a results file.
func secretFlagName(name string) bool {
	for _, s := range []string{"token", "secret", "password", "header"} {
		if strings.Contains(name, s) {
			return true
		}
	}
	return false
}

// redactURL drops a URL's user part, query and fragment, which may carry credentials.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return Redacted
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		u.User, u.RawQuery, u.Fragment = nil, "", ""
		return u.String() + " (query redacted)"
	}
	return raw
}

// CausesByCount returns the names of causes (a Causes map), most frequent first, ties in name order.
func CausesByCount(causes map[string]int64) []string {
	keys := make([]string, 0, len(causes))
	for k := range causes {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if causes[keys[i]] != causes[keys[j]] {
			return causes[keys[i]] > causes[keys[j]]
		}
		return keys[i] < keys[j]
	})
	return keys
}
