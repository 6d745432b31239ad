package keycastload

import (
	"context"
	"net"
	"testing"
	"time"
)

// TestRunAgainstADeadTargetCountsConnectFailuresApart is issue 13 item 3: once the target died,
// every worker retried its refused connect at once (1.1 million in 12 s) and each counted as a
// request, so throughput and p50 looked better than the truth. Connect failures are now counted apart
// from requests, in no throughput or latency figure, and each worker backs off.
func TestRunAgainstADeadTargetCountsConnectFailuresApart(t *testing.T) {
	forEachClient(t, func(t *testing.T, client string) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		// The target answers the reachability probe, then dies: every later connect is refused.
		go func() {
			if c, err := ln.Accept(); err == nil {
				c.Close()
			}
			ln.Close()
		}()
		cfg := baseConfig("http://"+ln.Addr().String(), 3)
		cfg.HTTPClient = client
		cfg.Concurrency, cfg.Duration = 4, time.Second
		res, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		s := res.Summary
		if s.TotalRequests != 0 || s.RequestsPerSecond != 0 || s.ErrorsNetwork != 0 || res.Latency().Count() != 0 || len(res.FailureCauses()) != 0 {
			t.Fatalf("refused connects counted as requests: %d requests, %.0f req/s, %d network errors, causes %v",
				s.TotalRequests, s.RequestsPerSecond, s.ErrorsNetwork, res.FailureCauses())
		}
		// With a 10 ms first backoff doubling to 1 s, a worker tries about 7 times in a second; without
		// backoff it tries thousands of times.
		if s.ConnectFailures == 0 || s.ConnectFailures > 4*20 {
			t.Fatalf("%d connect failures from 4 workers in 1 s", s.ConnectFailures)
		}
		if res.ConnectFailureCauses["network_econnrefused"] != int64(s.ConnectFailures) {
			t.Fatalf("connect failure causes %v for %d", res.ConnectFailureCauses, s.ConnectFailures)
		}
		if s.ErrorRate != 1 || s.UnintentionalErrorRate != 1 {
			t.Fatalf("error rate %v, unintentional %v: a run of failed connects is a total failure", s.ErrorRate, s.UnintentionalErrorRate)
		}
	})
}

func TestBackoffDoublesToItsBoundAndResets(t *testing.T) {
	var b backoff
	prev := time.Duration(0)
	for i := 0; i < 20; i++ {
		d := b.fail()
		if b.next < prev || b.next > backoffMax {
			t.Fatalf("step %d: backoff %v after %v", i, b.next, prev)
		}
		if d < b.next/2 || d > b.next*3/2 {
			t.Fatalf("step %d: wait %v outside ±50%% of %v", i, d, b.next)
		}
		prev = b.next
	}
	if b.next != backoffMax {
		t.Fatalf("backoff settled at %v, want %v", b.next, backoffMax)
	}
	b.reset()
	if b.fail(); b.next != backoffBase {
		t.Fatalf("after reset: %v", b.next)
	}
}
