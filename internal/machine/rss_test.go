package machine

import (
	"os"
	"runtime"
	"strings"
	"testing"
)

const statusSample = `Name:	linkkeys-loadte
Umask:	0022
State:	S (sleeping)
VmPeak:	 1262508 kB
VmHWM:	   28932 kB
VmRSS:	   28716 kB
RssAnon:	   11560 kB
RssFile:	   17156 kB
RssShmem:	       0 kB
VmData:	   84940 kB
Threads:	6
`

func TestParseProcStatusRSS(t *testing.T) {
	r, err := ParseProcStatusRSS([]byte(statusSample))
	if err != nil {
		t.Fatal(err)
	}
	want := RSS{Total: 28716 << 10, Anon: 11560 << 10, File: 17156 << 10, Shmem: 0}
	if r != want {
		t.Fatalf("got %+v, want %+v", r, want)
	}
	for _, c := range []struct{ name, text, err string }{
		{"missing RssFile", strings.Replace(statusSample, "RssFile:", "RssFiles:", 1), "lacks [RssFile]"},
		{"no unit", strings.Replace(statusSample, "11560 kB", "11560", 1), `line 7: RssAnon is "\t   11560": want a whole number and kB`},
		{"negative", strings.Replace(statusSample, "28716 kB", "-1 kB", 1), `line 6: VmRSS is "-1": want a whole number of kB`},
		{"twice", statusSample + "RssShmem:\t0 kB\n", "line 12: RssShmem appears twice"},
		{"empty", "", "lacks [VmRSS RssAnon RssFile RssShmem]"},
	} {
		_, err := ParseProcStatusRSS([]byte(c.text))
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: got error %v, want one containing %q", c.name, err, c.err)
		}
	}
}

func TestRSSSplitOfThisProcess(t *testing.T) {
	r, ok := RSSSplit()
	if runtime.GOOS != "linux" {
		if ok {
			t.Fatalf("RSSSplit on %s reported %+v; only Linux has /proc status", runtime.GOOS, r)
		}
		return
	}
	if !ok {
		b, _ := os.ReadFile("/proc/self/status")
		t.Fatalf("RSSSplit failed on Linux; /proc/self/status:\n%s", b)
	}
	// The kernel's counters are read at one instant: the parts add up to the whole.
	if r.Total == 0 || r.Anon+r.File+r.Shmem != r.Total {
		t.Fatalf("RSS %+v: RssAnon+RssFile+RssShmem != VmRSS", r)
	}
}

// FuzzParseProcStatusRSS: no input panics, and what parses is consistent with the text.
func FuzzParseProcStatusRSS(f *testing.F) {
	f.Add([]byte(statusSample))
	f.Add([]byte("VmRSS: 1 kB\nRssAnon: 1 kB\nRssFile: 0 kB\nRssShmem: 0 kB"))
	f.Add([]byte("VmRSS:\t18446744073709551615 kB\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseProcStatusRSS(b)
		if err != nil {
			if r != (RSS{}) {
				t.Fatalf("error %v with a non-zero result %+v", err, r)
			}
			return
		}
		for _, v := range []uint64{r.Total, r.Anon, r.File, r.Shmem} {
			if v%1024 != 0 || v > 1<<63 {
				t.Fatalf("%+v: a figure is not whole kB below 2^63", r)
			}
		}
	})
}
