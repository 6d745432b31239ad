package linkkeysload_test

import (
	"context"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/linkkeysload"
	"github.com/loadproof/loadproof/internal/linkkeysresult"
)

// BenchmarkCombined runs the small combined run of combinedConfig (200 held, 4 handshake loops
// and 4 request connections for 2 s, a 300-source ddos wave) against the reference server on
// loopback, sampling the server's METRICS log, and reports what each stream made per second of
// its duration, the run's length past its planned 2 s, and the client's CPU (per run, and per
// operation: every connection attempt and every request).
//
//	go test -run '^$' -bench Combined -benchtime 3x ./internal/linkkeysload/
func BenchmarkCombined(b *testing.B) {
	rs := startReal(b, config(b, scaleProfile))
	cfg := combinedConfig(b, rs)
	var reqs, hs, cpu, over, ops float64
	for b.Loop() {
		began := time.Now()
		res, err := linkkeysload.Combined(context.Background(), cfg, linkkeysload.Run{
			Metrics: &linkkeysload.MetricsSource{Location: rs.log}, SettleWait: 10 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		over += time.Since(began).Seconds() - 2
		reqs += float64(res.Combined.Stream(linkkeysresult.StreamRequests).Result.Requests.Completed) / 2
		hs += float64(res.Combined.Stream(linkkeysresult.StreamHandshakes).Result.Handshakes.Completed) / 2
		cpu += time.Duration(res.ClientCPU).Seconds()
		ops += float64(res.Attempts.Attempted + res.Combined.Stream(linkkeysresult.StreamRequests).Result.Requests.Completed)
	}
	n := float64(b.N)
	b.ReportMetric(reqs/n, "req/s")
	b.ReportMetric(hs/n, "handshakes/s")
	b.ReportMetric(cpu/n, "client-cpu-s/run")
	b.ReportMetric(over/n, "s-past-2s/run")
	b.ReportMetric(cpu/ops*1e6, "client-cpu-µs/op")
}
