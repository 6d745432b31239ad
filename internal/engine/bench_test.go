package engine

import (
	"context"
	"testing"
	"time"
)

// BenchmarkEngineOverheadClosed measures what the engine adds per operation in the closed model
// (ticket, record under the shard lock, interval collection) around a driver that does nothing
// and times itself, as the Keycast driver does. Divide by a real request's cost (about 6–7 µs of
// client CPU for get_public_key on this machine) to get the share of generator throughput.
func BenchmarkEngineOverheadClosed(b *testing.B) {
	d := DriverFunc(func(ctx context.Context, w *Worker, n int64) Outcome {
		return Outcome{Took: 100 * time.Microsecond}
	})
	b.ReportAllocs()
	b.ResetTimer()
	r, err := Execute(context.Background(), Config{Driver: d, DriverTimed: true, Workers: 50, Count: int64(b.N)})
	if err != nil || r.Total() != int64(b.N) {
		b.Fatal(err, r.Total())
	}
}

// BenchmarkEngineOverheadClosedEngineTimed is the same with the engine reading the clock itself
// (two time.Now per operation).
func BenchmarkEngineOverheadClosedEngineTimed(b *testing.B) {
	d := DriverFunc(func(ctx context.Context, w *Worker, n int64) Outcome { return Outcome{} })
	b.ReportAllocs()
	b.ResetTimer()
	r, err := Execute(context.Background(), Config{Driver: d, Workers: 50, Count: int64(b.N)})
	if err != nil || r.Total() != int64(b.N) {
		b.Fatal(err, r.Total())
	}
}
