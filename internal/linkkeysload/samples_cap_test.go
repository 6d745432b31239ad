package linkkeysload

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/engine"
)

// TestServerSamplesKeepAtMostTheCap (issue 27, finding 6): a target whose metrics page carries
// 50,000 unlabelled series added every one of them to every interval; the run now keeps at most
// engine.DefaultMaxServerSeries of them and counts the rest in server_series_dropped.
func TestServerSamplesKeepAtMostTheCap(t *testing.T) {
	const n = 50_000
	var page bytes.Buffer
	page.WriteString("linkkeys_server_accepted_connections_total 1\n")
	for i := range n {
		fmt.Fprintf(&page, "lp_hostile_series_%05d %d\n", i, i)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		w.Write(page.Bytes())
	}))
	defer srv.Close()
	d := engine.DriverFunc(func(ctx context.Context, w *engine.Worker, _ int64) engine.Outcome {
		time.Sleep(time.Millisecond)
		return engine.Outcome{}
	})
	run, err := engine.Execute(context.Background(), engine.Config{Driver: d, Workers: 1, Duration: 3 * time.Second, Interval: 500 * time.Millisecond,
		Sample: serverSampler(&MetricsSource{Location: srv.URL})})
	if err != nil {
		t.Fatal(err)
	}
	sampled, dropped := 0, int64(0)
	for i, iv := range run.Intervals {
		if len(iv.Server) > engine.DefaultMaxServerSeries {
			t.Errorf("interval %d keeps %d server series (cap %d)", i, len(iv.Server), engine.DefaultMaxServerSeries)
		}
		if len(iv.Server) > 0 {
			sampled++
			if got := iv.Counters[engine.CounterServerSeriesDropped]; got < int64(len(iv.Server)) {
				t.Errorf("interval %d: %d series kept but only %d counted dropped", i, len(iv.Server), got)
			}
		}
		dropped += iv.Counters[engine.CounterServerSeriesDropped]
	}
	if sampled == 0 {
		t.Fatal("no interval carries a server sample")
	}
	if want := int64(sampled) * (n - engine.DefaultMaxServerSeries); dropped < want {
		t.Errorf("server_series_dropped totals %d over %d samples, want at least %d", dropped, sampled, want)
	}
}
