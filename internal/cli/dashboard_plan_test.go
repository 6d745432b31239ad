package cli

import (
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/loadproof/loadproof/internal/capacity"
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

// TestDashboardCapacityPlanLength: a Keycast capacity run's dashboard plans the sum of its plan's
// phase durations (the documented example plan), and nothing when the plan cannot be read.
func TestDashboardCapacityPlanLength(t *testing.T) {
	_, planPath := capacityFixture(t)
	p, err := capacity.ReadPlan(planPath)
	if err != nil {
		t.Fatal(err)
	}
	var want time.Duration
	for _, ph := range p.Phases {
		want += time.Duration(ph.DurationSeconds) * time.Second
	}
	c := &cobra.Command{Use: "capacity"}
	c.Flags().String("plan", "", "")
	if err := c.Flags().Parse([]string{"--plan", planPath}); err != nil {
		t.Fatal(err)
	}
	if got, rate := capacityPlanLength(c); got != want || want == 0 || rate != 0 {
		t.Errorf("planned %v rate %v, want %v (the phases' sum) and 0", got, rate, want)
	}
	_ = c.Flags().Set("plan", planPath+".missing")
	if got, _ := capacityPlanLength(c); got != 0 {
		t.Errorf("an unreadable plan planned %v, want 0", got)
	}
}
