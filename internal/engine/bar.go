package engine

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// Bar is the live progress bar a command shows on a terminal instead of its progress lines: done
// of total operations, the success and failure counts beside it, and the elapsed time. Feed it
// from Config.Progress (or any running totals) with Update; Close waits for its last frame. It
// refreshes whatever w is (callers choose it for a terminal only), so a test can read what it drew.
type Bar struct {
	p      *mpb.Progress
	bar    *mpb.Bar
	ok, no atomic.Int64
	once   sync.Once
}

// NewBar draws a bar named name of total operations on w (a terminal); okName and noName label
// the success and failure counts ("success"/"failed", "allowed"/"denied").
func NewBar(w io.Writer, name string, total int64, okName, noName string) *Bar {
	b := &Bar{p: mpb.New(mpb.WithOutput(w), mpb.WithAutoRefresh(), mpb.WithWidth(48), mpb.WithRefreshRate(150*time.Millisecond))}
	b.bar = b.p.AddBar(total,
		mpb.PrependDecorators(
			decor.Name(name+" ", decor.WC{C: decor.DindentRight}),
			decor.CountersNoUnit("%d / %d", decor.WCSyncWidth),
		),
		mpb.AppendDecorators(
			decor.Any(func(decor.Statistics) string {
				return fmt.Sprintf("%s=%d %s=%d", okName, b.ok.Load(), noName, b.no.Load())
			}),
			decor.Name(" "),
			decor.Elapsed(decor.ET_STYLE_GO),
		),
	)
	return b
}

// Update sets the running totals: done operations, of which ok succeeded and failed did not.
func (b *Bar) Update(done, ok, failed int64) {
	b.ok.Store(ok)
	b.no.Store(failed)
	b.bar.SetCurrent(done)
}

// Close ends the bar (aborted where it stands if the total was not reached) and waits for its
// last frame to be drawn.
func (b *Bar) Close() {
	b.once.Do(func() {
		if !b.bar.Completed() {
			b.bar.Abort(false)
		}
		b.p.Wait()
	})
}
