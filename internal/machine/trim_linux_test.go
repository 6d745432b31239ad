package machine

import (
	"fmt"
	"os"
	"sort"
	"testing"
)

// TestTrimCodePages: trimming drops resident pages of this test binary, the
// file-backed RSS falls, and the process goes on running code and reading
// read-only data (which fault back in from the page cache).
func TestTrimCodePages(t *testing.T) {
	before, ok := RSSSplit()
	if !ok {
		t.Fatal("RSSSplit failed on Linux")
	}
	dropped, err := TrimCodePages()
	if err != nil {
		t.Fatal(err)
	}
	after, _ := RSSSplit()
	if dropped == 0 {
		b, _ := os.ReadFile("/proc/self/maps")
		t.Fatalf("TrimCodePages dropped nothing; /proc/self/maps:\n%s", b)
	}
	if after.File >= before.File {
		t.Fatalf("file-backed RSS %d bytes before trimming %d, %d after: no fall", before.File, dropped, after.File)
	}
	// Code and tables that were dropped still work.
	xs := []string{"c", "a", "b"}
	sort.Strings(xs)
	if got := fmt.Sprintf("%v %x", xs, 255); got != "[a b c] ff" {
		t.Fatalf("after trimming, Sprintf gives %q", got)
	}
	t.Logf("file RSS %d KiB before, %d KiB after dropping %d KiB", before.File>>10, after.File>>10, dropped>>10)
}
