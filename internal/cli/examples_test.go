package cli

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestEveryCommandHasExamplesThatParse: every visible command that runs something has 3 to 5
// examples in its help, and every example's flags parse (a renamed flag breaks this test, not a
// user's copy and paste).
func TestEveryCommandHasExamplesThatParse(t *testing.T) {
	for _, tree := range []Tree{Loadproof, LinkKeys, Keycast} {
		env, _, _ := lkTestEnv()
		root := NewRoot(tree, env)
		var walk func(c *cobra.Command)
		walk = func(c *cobra.Command) {
			for _, s := range c.Commands() {
				walk(s)
			}
			if c.Hidden || !c.Runnable() || c.Name() == "help" || c.Name() == "completion" || c.Name() == "machine" {
				return
			}
			lines := strings.Split(strings.TrimSpace(c.Example), "\n")
			if c.Example == "" || len(lines) < 3 || len(lines) > 5 {
				t.Errorf("%s: %d examples, want 3 to 5", c.CommandPath(), len(lines))
				return
			}
			for _, line := range lines {
				checkExample(t, root, line)
			}
		}
		walk(root)
	}
}

// checkExample parses one example line's flags with the command it names.
func checkExample(t *testing.T, root *cobra.Command, line string) {
	t.Helper()
	line, _, _ = strings.Cut(line, "#")
	args := splitWords(line)
	for len(args) > 0 && strings.Contains(args[0], "=") { // VAR=value prefixes
		args = args[1:]
	}
	if len(args) == 0 || args[0] != root.Name() {
		return // another tool's line (kubectl)
	}
	if i := indexOf(args, "..."); i >= 0 {
		args = args[:i]
	}
	cmd, rest, err := root.Find(args[1:])
	if err != nil {
		t.Errorf("example %q: %v", line, err)
		return
	}
	if err := cmd.ParseFlags(rest); err != nil {
		t.Errorf("example %q: %v", line, err)
	}
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// splitWords splits a shell line on blanks, keeping single-quoted words whole.
func splitWords(s string) []string {
	var out []string
	var cur strings.Builder
	quoted, any := false, false
	for _, r := range s {
		switch {
		case r == '\'':
			quoted, any = !quoted, true
		case (r == ' ' || r == '\t') && !quoted:
			if any {
				out = append(out, cur.String())
				cur.Reset()
				any = false
			}
		default:
			cur.WriteRune(r)
			any = true
		}
	}
	if any {
		out = append(out, cur.String())
	}
	return out
}
