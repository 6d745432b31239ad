package cli

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/loadproof/loadproof/internal/capacity"
	"github.com/loadproof/loadproof/internal/capacity/plan"
)

// benchPlanRef is how a bench script names a plan: bench/plans/NAME.json.
var benchPlanRef = regexp.MustCompile(`bench/plans/[A-Za-z0-9._-]+\.json`)

// benchMetricRef is how a bench script reads a figure from a report's metrics: "stream.figure" in
// quotes (the plans name their ddos wave "ddos").
var benchMetricRef = regexp.MustCompile(`"((held|handshakes|requests|ddos|server)\.[a-z0-9_]+)"`)

// TestBenchPlansAreValid keeps the bench plans from rotting: every bench/plans/*.json parses and
// validates as `loadproof linkkeys capacity` would validate it (the profiles' variables through the
// reference server's own configuration), survives an encode and parse unchanged, every plan a bench
// script names exists, and every figure a script reads is one the capacity command reports (a
// renamed figure would otherwise print as null).
func TestBenchPlansAreValid(t *testing.T) {
	paths, err := filepath.Glob("../../bench/plans/*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatal("no plan under bench/plans: the bench scripts run their phases from there")
	}
	for _, path := range paths {
		p, err := capacity.ReadLinkKeysPlan(path)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		env, err := capacity.ValidateLinkKeys(p, capacity.LinkKeysValidateOptions{ServerConfigLine: lkExpectedConfigLine})
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if env != plan.EnvLocal || p.Target.Mode != plan.TargetStart {
			t.Errorf("%s: target %q (environment %q): a bench plan starts its own servers on loopback", path, p.Target.Mode, env)
		}
		b, err := p.Encode()
		if err != nil {
			t.Errorf("%s: encode: %v", path, err)
			continue
		}
		back, err := plan.ParseLinkKeysPlan(b)
		if err != nil || !reflect.DeepEqual(back, p) {
			t.Errorf("%s: an encode and parse changed the plan (%v)", path, err)
		}
	}
	scripts, err := filepath.Glob("../../bench/*.sh")
	if err != nil {
		t.Fatal(err)
	}
	named := 0
	for _, s := range scripts {
		b, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		for _, ref := range benchPlanRef.FindAllString(string(b), -1) {
			named++
			if _, err := os.Stat(filepath.Join("../..", ref)); err != nil {
				t.Errorf("%s names %s, which is not there: %v", s, ref, err)
			}
		}
		for _, m := range benchMetricRef.FindAllStringSubmatch(string(b), -1) {
			figure := strings.TrimPrefix(m[1], m[2]+".")
			if !slices.Contains(plan.LinkKeysMetrics[m[2]], figure) {
				t.Errorf("%s reads %s, which no %s stream reports (see plan.LinkKeysMetrics)", s, m[1], m[2])
			}
		}
	}
	if named == 0 {
		t.Error("no bench script names a plan under bench/plans")
	}
}
