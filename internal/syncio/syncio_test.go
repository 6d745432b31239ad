package syncio

import (
	"bytes"
	"strings"
	"sync"
	"testing"

	"github.com/loadproof/loadproof/internal/testwait"
)

// TestWritesDoNotInterleave: lines written from many goroutines at once arrive whole.
func TestWritesDoNotInterleave(t *testing.T) {
	var buf bytes.Buffer // not safe for concurrent use: the race detector and the line check see any overlap
	w := NewWriter(&buf)
	line := strings.Repeat("x", 100) + "\n"
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				if _, err := w.Write([]byte(line)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	testwait.WaitGroup(t, &wg, testwait.Long, "the 16 writers' ends")
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 16*200 {
		t.Fatalf("%d lines, want %d", len(lines), 16*200)
	}
	for i, l := range lines {
		if l+"\n" != line {
			t.Fatalf("line %d is %q: writes interleaved", i, l)
		}
	}
}
