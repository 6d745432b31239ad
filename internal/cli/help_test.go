package cli

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestClientHelpGroupsEveryFlag: in every client command's help, in both trees, every flag is in
// a named group (none left to "Other flags"), each non-switch flag shows a placeholder naming the
// kind of value it takes (never a Go type such as uint32 or string), every flag is listed exactly
// once, and the groups come in their declared order.
func TestClientHelpGroupsEveryFlag(t *testing.T) {
	seen := map[string]bool{}
	for _, tree := range []Tree{Loadproof, LinkKeys, Keycast} {
		env, _, _ := lkTestEnv()
		root := NewRoot(tree, env)
		var walk func(c *cobra.Command)
		walk = func(c *cobra.Command) {
			for _, sub := range c.Commands() {
				walk(sub)
			}
			if !groupedHelpCommands[c.Name()] || !c.HasParent() || !isHarnessTree(c.Parent()) {
				return
			}
			seen[c.Name()] = true
			var out bytes.Buffer
			c.SetOut(&out)
			if err := c.Usage(); err != nil {
				t.Fatalf("%s: %v", c.CommandPath(), err)
			}
			help := out.String()
			if strings.Contains(help, "\nFlags:\n") || strings.Contains(help, otherFlags+":") {
				t.Errorf("%s: flags outside the groups:\n%s", c.CommandPath(), help)
			}
			c.LocalFlags().VisitAll(func(f *pflag.Flag) {
				where := c.CommandPath() + " --" + f.Name
				if g := flagGroupOf(f.Name); g == otherFlags {
					t.Errorf("%s: in no group", where)
				}
				p := flagPlaceholder(f)
				switch {
				case f.Value.Type() == "bool" && p != "":
					t.Errorf("%s: a switch shown as taking %q", where, p)
				case f.Value.Type() != "bool" && (goTypeNames[p] || p == "VALUE" || strings.ToLower(p) == p && !strings.ContainsAny(p, "|=")):
					t.Errorf("%s: placeholder %q names no kind of value", where, p)
				}
				line := regexp.MustCompile(`(?m)^ *(-., )?--` + regexp.QuoteMeta(f.Name) + `( |$)`)
				if n := len(line.FindAllString(help, -1)); n != 1 {
					t.Errorf("%s: listed %d times in the help", where, n)
				}
			})
			last := -1
			for i, g := range clientFlagGroups {
				at := strings.Index(help, "\n"+g.title+":\n")
				if at < 0 {
					continue
				}
				if at < last {
					t.Errorf("%s: group %q (#%d) out of order", c.CommandPath(), g.title, i)
				}
				last = at
			}
		}
		walk(root)
	}
	for name := range groupedHelpCommands {
		if !seen[name] {
			t.Errorf("no client command %q found to check", name)
		}
	}
}

// TestClientHelpPlaceholders: the placeholders a user reads most, exactly.
func TestClientHelpPlaceholders(t *testing.T) {
	env, _, _ := lkTestEnv()
	for _, c := range []struct {
		tree Tree
		args []string
		want []string
	}{
		{LinkKeys, []string{"connections"}, []string{"      --count N ", "      --hold DURATION ", "      --json FILE ", "      --client-ip-base IP ",
			"      --target HOST:PORT ", "\nLoad:\n", "\nSource addresses:\n", "      --keep-tls-state   "}},
		{LinkKeys, []string{"request-bench"}, []string{"      --duration DURATION ", "      --rate PER_SECOND ", "      --op domain-keys|hello "}},
		{Keycast, []string{"run"}, []string{"  -n, --requests N ", "  -d, --duration DURATION ", "  -o, --output PATH ", "  -u, --url URL "}},
	} {
		root := NewRoot(c.tree, env)
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs(append(c.args, "--help"))
		if err := root.Execute(); err != nil {
			t.Fatal(err)
		}
		for _, w := range c.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%v --help lacks %q:\n%s", c.args, w, out.String())
			}
		}
	}
}
