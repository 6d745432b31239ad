// Package syncio holds the one writer several goroutines share: a Writer passes each Write to the
// writer under it whole, one at a time, so lines written with one call never interleave (a child
// server's protocol lines to its parent, a coordinator's progress lines).
package syncio

import (
	"io"
	"sync"
)

// Writer serialises writes to W.
type Writer struct {
	mu sync.Mutex
	w  io.Writer
}

// NewWriter returns a Writer over w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write writes p to the underlying writer while no other Write runs.
func (l *Writer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
