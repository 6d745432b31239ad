package cli

import (
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/loadproof/loadproof/internal/durflag"
)

// TestDashboardRunPlan: the dashboard's planned length and target rate come from the command's own
// flags: --duration (or its alias --duration-secs, counted once) plus --hold-secs, and --rate.
func TestDashboardRunPlan(t *testing.T) {
	cmd := func(args ...string) *cobra.Command {
		c := &cobra.Command{Use: "x"}
		var secs uint64
		var hold time.Duration
		d := durflag.NewSeconds(&secs, 10)
		c.Flags().Var(d, "duration-secs", "")
		c.Flags().Var(d, "duration", "")
		c.Flags().Var(durflag.NewDuration(&hold, 5*time.Second), "hold-secs", "")
		c.Flags().String("rate", "", "")
		if err := c.Flags().Parse(args); err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, c := range []struct {
		args    []string
		planned time.Duration
		rate    float64
	}{
		{nil, 15 * time.Second, 0},
		{[]string{"--duration", "30s", "--rate", "250"}, 35 * time.Second, 250},
		{[]string{"--duration-secs", "20", "--hold-secs", "0"}, 20 * time.Second, 0},
	} {
		p, r := runPlan(cmd(c.args...))
		if p != c.planned || r != c.rate {
			t.Errorf("%q: planned %v rate %v, want %v and %v", c.args, p, r, c.planned, c.rate)
		}
	}
	if p, r := runPlan(&cobra.Command{Use: "none"}); p != 0 || r != 0 {
		t.Errorf("a command without those flags: planned %v rate %v, want 0", p, r)
	}
}
