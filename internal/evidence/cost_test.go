package evidence

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/cost"
)

// TestRecordBundleMemberCosts: a record bundle's priced result files are each read with the
// harness reader Verify is given, so a cost it refuses fails the bundle; unpriced files are not
// read for cost, and without a reader nothing is claimed about cost.
func TestRecordBundleMemberCosts(t *testing.T) {
	c, err := cost.Compute(cost.Inputs{Seconds: 36, Load: []cost.Price{{PerHour: 1, Currency: "EUR", Given: true}}, Capacity: cost.Capacity{Requests: 100}})
	if err != nil {
		t.Fatal(err)
	}
	priced, _ := json.Marshal(map[string]any{"format": "x", "cost": c})
	dir := t.TempDir()
	files := map[string][]byte{"search.json": []byte(`{"steps":[]}`), "trial-s01-t1.json": priced, "trial-s01-t2.json": []byte(`{"format":"x"}`)}
	var names []string
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	if err := WriteManifest(dir, names, time.Now()); err != nil {
		t.Fatal(err)
	}
	var read []string
	ok := func(path string, _ []byte) error { read = append(read, filepath.Base(path)); return nil }
	f := VerifyRecordBundle(dir, "search.json", nil, VerifyOptions{ReadResult: ok})
	if !f.OK() || len(read) != 1 || read[0] != "trial-s01-t1.json" || !strings.Contains(strings.Join(f.Held, "\n"), "the cost of each of 1 priced result files recomputes") {
		t.Fatalf("read %v; findings %+v", read, f)
	}
	refuse := func(path string, _ []byte) error {
		return errors.New(filepath.Base(path) + ": cost: the recorded cost disagrees with its recomputation")
	}
	f = VerifyRecordBundle(dir, "search.json", nil, VerifyOptions{ReadResult: refuse})
	if f.OK() || !strings.Contains(strings.Join(f.Problems, "\n"), "trial-s01-t1.json: cost: the recorded cost disagrees") {
		t.Fatalf("a refused cost verified: %+v", f)
	}
	f = VerifyRecordBundle(dir, "search.json", nil, VerifyOptions{})
	if !f.OK() || strings.Contains(strings.Join(f.Held, "\n"), "cost") {
		t.Fatalf("without a reader: %+v", f)
	}
}
