package machine

import (
	"encoding/json"
	"runtime"
	"testing"
)

func TestCollect(t *testing.T) {
	t.Setenv("TCP_MAX_CONNECTIONS", "123")
	t.Setenv("PUBLIC_READ_BURST", "7")
	t.Setenv("UNRELATED_X", "1")
	r := Collect("TCP_", "PUBLIC_READ_")
	if r.Cores != runtime.NumCPU() || r.GoVersion != runtime.Version() {
		t.Fatalf("cores/go: %+v", r)
	}
	if r.Settings["TCP_MAX_CONNECTIONS"] != "123" || r.Settings["PUBLIC_READ_BURST"] != "7" {
		t.Fatalf("settings: %v", r.Settings)
	}
	if _, ok := r.Settings["UNRELATED_X"]; ok {
		t.Fatal("unrelated variable recorded")
	}
	if runtime.GOOS == "linux" {
		if r.Kernel == "" || r.MemoryBytes == 0 || r.NofileHard == 0 || r.IPLocalPortRange == "" {
			t.Fatalf("linux fields missing: %+v", r)
		}
		if rss, ok := RSSBytes(); !ok || rss == 0 {
			t.Fatal("RSS unreadable")
		}
	}
	if _, err := json.Marshal(r); err != nil {
		t.Fatal(err)
	}
	if got := r.SettingNames(); len(got) != 2 || got[0] != "PUBLIC_READ_BURST" {
		t.Fatalf("names %v", got)
	}
}

func TestRaiseNofile(t *testing.T) {
	soft, err := RaiseNofile()
	if runtime.GOOS == "windows" {
		if err == nil {
			t.Fatal("RaiseNofile on Windows: want an error, there is no such limit")
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if r := Collect(); soft == 0 || r.NofileSoft != soft {
		t.Fatalf("RaiseNofile = %d, but the record says the soft limit is %d", soft, r.NofileSoft)
	}
}
