package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The client commands' help lists their flags in groups (what to hit, how hard, from where, what
// to write, how to watch, how to split and sign), each flag with a placeholder that names the kind
// of value it takes (--count N, --duration DURATION, --json FILE), never a Go type.

// flagGroup is one group of a command's help: its title and which flags belong to it.
type flagGroup struct {
	title string
	has   func(name string) bool
}

func named(names ...string) func(string) bool {
	return func(n string) bool {
		for _, x := range names {
			if x == n {
				return true
			}
		}
		return false
	}
}

func prefixed(prefixes ...string) func(string) bool {
	return func(n string) bool {
		for _, p := range prefixes {
			if strings.HasPrefix(n, p) {
				return true
			}
		}
		return false
	}
}

// clientFlagGroups are the groups, in the order the help shows them; a flag belongs to the first
// group that has it.
var clientFlagGroups = []flagGroup{
	{"Target", named("info-file", "target", "fingerprint", "domain", "allow-host", "refuse-host", "preflight", "url", "plan",
		"users-file", "ca-cert", "insecure-skip-verify", "database-url", "master-key-path", "mode")},
	{"Held population", prefixed("held")},
	{"Handshake stream", prefixed("handshake-")},
	{"Request stream", prefixed("request-")},
	{"DDoS waves", prefixed("ddos-")},
	{"Load", named("count", "sources", "connections", "users", "concurrency", "duration", "duration-secs", "hold", "hold-secs",
		"requests", "rate", "rate-from", "ramp-up", "op", "pipeline", "resume", "scenario", "method", "seed", "keep-tls-state",
		"attempt-timeout-secs", "timeout", "http-client", "stop-window", "settle-wait")},
	{"Source addresses", named("client-ip-base", "client-ip-count")},
	{"Processes", named("workers", "workers-in-turn", "stream-processes")},
	{"Output", named("json", "output", "progress-every", "report-interval", "server-metrics", "max-error-rate")},
	{"Watching the run", prefixed("dashboard", "remote-write")},
	{"Split runs and signatures", named("segment", "run-id", "sign-key")},
	{"Cost", named("cost-per-hour", "server-cost-per-hour")},
	{"Help", named("help", "version")},
}

// otherFlags is the title of the flags no group has (the help test allows none in a client
// command).
const otherFlags = "Other flags"

// flagGroupOf returns the title of the group a flag belongs to, or otherFlags.
func flagGroupOf(name string) string {
	for _, g := range clientFlagGroups {
		if g.has(name) {
			return g.title
		}
	}
	return otherFlags
}

// stringPlaceholders name what a string flag without a `word` in its help takes.
var stringPlaceholders = map[string]string{
	"client-ip-base": "IP", "held-ip-base": "IP", "handshake-ip-base": "IP", "request-ip-base": "IP",
	"segment": "I/N", "op": "domain-keys|hello", "request-op": "domain-keys|hello", "rate": "PER_SECOND",
	"dashboard": "HOST:PORT", "dashboard-token": "TOKEN", "remote-write-histograms": "native|classic",
	"url": "URL", "scenario": "warm-cache|cold-start|mixed", "method": "METHOD", "users-file": "FILE",
	"output": "PATH", "plan": "FILE", "http-client": "fast|std", "ca-cert": "FILE", "database-url": "URL|PATH",
	"master-key-path": "FILE", "mode": "db|http", "server-metrics": "SOURCE", "ddos-wave": "sources=S,at=T[,…]",
	"allow-host": "HOST", "refuse-host": "HOST", "remote-write-header": "'NAME: VALUE'", "remote-write-label": "NAME=VALUE", "cost-per-hour": "PRICE", "server-cost-per-hour": "PRICE",
}

// goTypeNames are what pflag shows for a flag without a `word` in its help: a Go type, never a
// placeholder of ours.
var goTypeNames = map[string]bool{"string": true, "stringArray": true, "stringSlice": true, "int": true, "int32": true,
	"int64": true, "uint": true, "uint32": true, "uint64": true, "float": true, "float32": true, "float64": true,
	"duration": true, "bool": true, "": true}

// flagPlaceholder is what the help shows after a flag's name: the kind of value it takes ("" for a
// switch).
func flagPlaceholder(f *pflag.Flag) string {
	if f.Value.Type() == "bool" {
		return ""
	}
	name, _ := pflag.UnquoteUsage(f)
	switch name {
	case "int", "int32", "int64", "uint", "uint32", "uint64":
		return "N"
	case "float", "float32", "float64":
		return "NUMBER"
	case "duration":
		return "DURATION"
	case "string", "stringArray", "stringSlice":
		if p, ok := stringPlaceholders[f.Name]; ok {
			return p
		}
		return "VALUE"
	}
	return strings.ToUpper(name)
}

// flagDefault is the "(default …)" pflag would add, or "" for a zero default.
func flagDefault(f *pflag.Flag) string {
	switch f.DefValue {
	case "", "0", "false", "[]", "0s", "<nil>":
		return ""
	}
	if f.Value.Type() == "string" {
		return fmt.Sprintf(" (default %q)", f.DefValue)
	}
	return " (default " + f.DefValue + ")"
}

// groupedFlagUsages renders fs's flags (hidden ones left out) in clientFlagGroups' order, a titled
// block each, with placeholders and defaults; usage text wraps at no width, as pflag's does.
func groupedFlagUsages(fs *pflag.FlagSet) string {
	type row struct{ left, usage string }
	blocks := map[string][]row{}
	width := 0
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		left := "      --" + f.Name
		if f.Shorthand != "" && f.ShorthandDeprecated == "" {
			left = "  -" + f.Shorthand + ", --" + f.Name
		}
		if p := flagPlaceholder(f); p != "" {
			left += " " + p
		}
		_, usage := pflag.UnquoteUsage(f)
		g := flagGroupOf(f.Name)
		blocks[g] = append(blocks[g], row{left, usage + flagDefault(f)})
		width = max(width, len([]rune(left)))
	})
	var b strings.Builder
	titles := make([]string, 0, len(clientFlagGroups)+1)
	for _, g := range clientFlagGroups {
		titles = append(titles, g.title)
	}
	for _, title := range append(titles, otherFlags) {
		rows := blocks[title]
		if len(rows) == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		b.WriteString(title + ":\n")
		for _, r := range rows {
			pad := width - len([]rune(r.left)) + 3
			b.WriteString(r.left + strings.Repeat(" ", pad) + r.usage + "\n")
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

// groupedUsageTemplate is cobra's usage template with the local flags in groups.
const groupedUsageTemplate = `Usage:{{if .Runnable}}
  {{.UseLine}}{{end}}{{if .HasAvailableSubCommands}}
  {{.CommandPath}} [command]{{end}}{{if gt (len .Aliases) 0}}

Aliases:
  {{.NameAndAliases}}{{end}}{{if .HasExample}}

Examples:
{{.Example}}{{end}}{{if .HasAvailableLocalFlags}}

{{groupedFlagUsages .LocalFlags}}{{end}}{{if .HasAvailableInheritedFlags}}

Global Flags:
{{.InheritedFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}{{if .HasHelpSubCommands}}

Additional help topics:{{range .Commands}}{{if .IsAdditionalHelpTopicCommand}}
  {{rpad .CommandPath .CommandPathPadding}} {{.Short}}{{end}}{{end}}{{end}}
`

func init() {
	cobra.AddTemplateFunc("groupedFlagUsages", groupedFlagUsages)
}

// groupedHelpCommands are the commands whose help groups their flags: the long-running clients.
var groupedHelpCommands = map[string]bool{
	"connections": true, "handshake-bench": true, "request-bench": true, "ddos": true, "combined": true,
	"capacity": true, "run": true, "setup": true,
}

// applyGroupedHelp gives the client commands under root their grouped flag help.
func applyGroupedHelp(root *cobra.Command) {
	for _, c := range root.Commands() {
		applyGroupedHelp(c)
		if groupedHelpCommands[c.Name()] && c.HasParent() && isHarnessTree(c.Parent()) {
			c.SetUsageTemplate(groupedUsageTemplate)
		}
	}
}

// isHarnessTree reports whether c is the root of a harness's commands (linkkeys-loadtest,
// keycast-loadtest, or loadproof's linkkeys and keycast).
func isHarnessTree(c *cobra.Command) bool {
	switch c.Name() {
	case "linkkeys-loadtest", "keycast-loadtest", "linkkeys", "keycast":
		return true
	}
	return false
}
