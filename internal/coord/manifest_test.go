package coord

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// ReadManifest reads back what WriteManifest wrote.
func TestReadManifestReadsWhatWriteManifestWrote(t *testing.T) {
	at := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	m := Manifest{Format: ManifestFormat, Run: "r1", Command: []string{"linkkeys", "connections"}, StartedAt: at, EndedAt: at.Add(time.Second),
		Workers: []WorkerInfo{{Index: 0, Name: "w0", RTTMs: 1.5}},
		Tasks:   []TaskRecord{{ID: 1, StartAt: at, Starts: []time.Time{at.Add(time.Millisecond)}, StartSkewMs: 1}}}
	path := filepath.Join(t.TempDir(), "manifest.json")
	if err := WriteManifest(path, m); err != nil {
		t.Fatal(err)
	}
	got, err := ReadManifest(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Tasks, m.Tasks) || got.Workers[0].RTTMs != 1.5 || got.Run != "r1" {
		t.Errorf("read back %+v, want %+v", got, m)
	}
}

// A file that is no coordination manifest is refused with a message naming the problem.
func TestParseManifestRefusesOtherFiles(t *testing.T) {
	for _, tc := range []struct{ in, msg string }{
		{`{`, "unexpected end of JSON input"},
		{`[]`, "cannot unmarshal array"},
		{`{"tasks":[]}`, `format "", want "loadproof.coordination/v1"`},
		{`{"format":"loadproof.result/v2"}`, `format "loadproof.result/v2"`},
	} {
		if _, err := ParseManifest([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("ParseManifest(%q): %v, want an error with %q", tc.in, err, tc.msg)
		}
	}
}

// FuzzParseManifest: any bytes are read or refused with a message, never a panic.
func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(`{"format":"loadproof.coordination/v1","tasks":[{"start_at":"2026-12-07T10:00:00Z","starts":["2026-12-07T10:00:00.001Z"],"start_skew_ms":1}],"workers":[{"rtt_ms":0.5}]}`))
	f.Add([]byte(`{"format":"x"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := ParseManifest(b); err != nil && err.Error() == "" {
			t.Fatal("an error without a message")
		}
	})
}
