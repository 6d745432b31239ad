//go:build e2e

package e2e_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/dashboard"
	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/report"
	"github.com/loadproof/loadproof/internal/result"
)

// TestDashboardDrawsIdenticalKindsOnce feeds the dashboard a handshake-bench whose every attempt
// succeeded (attempt and connect_handshake time the same handshakes) and whose server exposes a
// counter that never moves: live and final, the latency is drawn once, under connect_handshake,
// and the idle counter not at all, in the same chart order.
func TestDashboardDrawsIdenticalKindsOnce(t *testing.T) {
	b := needBrowser(t)
	d, err := dashboard.Start(dashboard.Options{Addr: "127.0.0.1:0", Title: "handshake-bench (live)", Harness: "linkkeys", Command: "handshake-bench",
		Target: "127.0.0.1:1", Planned: 4 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	p, err := b.Open(d.URL(), strings.TrimSuffix(d.URL(), "/"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Wait(`document.body && document.body.getAttribute('data-rendered') >= '1'`, 90*time.Second); err != nil {
		t.Fatalf("%v; console %q", err, p.Errors())
	}
	start := time.Now().UTC()
	env := &result.Envelope{Format: result.Format, Harness: "linkkeys", Command: "handshake-bench", Target: "127.0.0.1:1", IntervalSecs: 1,
		StartedAt: start, EndedAt: start.Add(4 * time.Second), Classes: []string{"success", "network"}, Totals: map[string]int64{},
		Histograms: map[string]*hist.Histogram{"attempt": hist.New(), "connect_handshake": hist.New()}}
	for i := range 4 {
		iv := result.Interval{T: float64(i), Secs: 1, Counts: map[string]int64{"success": 30},
			Latency: map[string]*hist.Histogram{"attempt": hist.New(), "connect_handshake": hist.New()},
			Server:  map[string]float64{"shed_handshake_global_total": 7, "handshakes_total": float64(30 * i)}}
		for k := range 30 {
			us := int64(500 + 40*k + 100*i)
			iv.Latency["attempt"].RecordMicros(us)
			iv.Latency["connect_handshake"].RecordMicros(us)
		}
		for k, h := range iv.Latency {
			env.Histograms[k].Merge(h)
		}
		env.Totals["success"] += 30
		env.Intervals = append(env.Intervals, iv)
		d.Interval(&env.Intervals[i])
	}
	if err := p.Wait(`(window.__lpCharts || []).some(c => c.id === 'throughput' && c.points >= 4)`, 90*time.Second); err != nil {
		t.Fatalf("%v; console %q", err, p.Errors())
	}
	ids := func() []string {
		cs, err := p.Charts()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, c := range cs {
			out = append(out, c.ID)
		}
		return out
	}
	live := ids()
	liveCharts, err := p.Charts()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range liveCharts {
		if slices.Contains(c.Series, "shed_handshake_global_total") {
			t.Errorf("live chart %s draws the idle counter", c.ID)
		}
		if c.ID == "server-other-per-second" && !slices.Contains(c.Series, "handshakes_total") {
			t.Errorf("live chart %s lacks the moving counter: %q", c.ID, c.Series)
		}
	}
	out := t.ArtifactDir()
	if err := p.Screenshot(filepath.Join(out, "dashboard-kinds-live.png")); err != nil {
		t.Error(err)
	}
	data, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "hb.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	m, _ := drawModel(t, []string{path}, report.HTMLOptions{})
	if err := d.Finish(m); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(`document.body.getAttribute('data-final') === '1'`, 90*time.Second); err != nil {
		t.Fatalf("%v; console %q", err, p.Errors())
	}
	final := ids()
	if err := p.Screenshot(filepath.Join(out, "dashboard-kinds-final.png")); err != nil {
		t.Error(err)
	}
	for _, set := range [][]string{live, final} {
		if !slices.Contains(set, "latency-connect_handshake") || slices.Contains(set, "latency-attempt") {
			t.Errorf("charts %q: want connect_handshake's latency once, not attempt's beside it", set)
		}
	}
	var kept []string
	for _, id := range final {
		if slices.Contains(live, id) {
			kept = append(kept, id)
		}
	}
	if !slices.Equal(kept, live) {
		t.Errorf("charts live %q, final %q: want the same order", live, final)
	}
	for _, g := range m.Runs[0].Server {
		for _, s := range g.Series {
			if s.Name == "shed_handshake_global_total" {
				t.Errorf("the idle counter is drawn in %s/%s", g.Group, g.Unit)
			}
		}
	}
	if errs := p.Errors(); len(errs) > 0 {
		t.Errorf("console errors: %q", errs)
	}
}
