package linkkeysserver

import (
	"context"
	"io"
	"time"
)

// WriteMetricsLine writes s as one METRICS line with a newline.
func WriteMetricsLine(w io.Writer, s Snapshot) error {
	b := AppendMetricsLine(make([]byte, 0, 512), s)
	b = append(b, '\n')
	_, err := w.Write(b)
	return err
}

// MetricsLoop prints a "running" METRICS line from snap at once and then
// every interval (at least one second, as upstream). After each line, when
// duration is positive and the line's whole elapsed seconds reach it, the
// loop returns nil. It returns ctx's error when ctx ends first. The caller
// prints the "final" line. A write error ends the loop with that error.
func MetricsLoop(ctx context.Context, w io.Writer, interval, duration time.Duration, snap func() Snapshot) error {
	interval = max(interval, time.Second)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		s := snap()
		s.Label = "running"
		if err := WriteMetricsLine(w, s); err != nil {
			return err
		}
		if duration > 0 && time.Duration(int64(s.ElapsedSecs))*time.Second >= duration {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
