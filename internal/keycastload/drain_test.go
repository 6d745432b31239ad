package keycastload

import (
	"context"
	"io"
	"net"
	"testing"
	"time"
)

// silentServer accepts connections and reads from them, but never answers.
func silentServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, c); c.Close() }()
			t.Cleanup(func() { c.Close() })
		}
	}()
	return "http://" + ln.Addr().String()
}

// TestRunEndsWithinItsDurationPlusTheDrain is issue 13 item 4: `run --duration 3` against a server
// that accepts and never replies took 50 s (the metrics fetches' 10 s each, then the 30 s request
// timeout). The run now ends within its duration plus a bounded drain, cutting off the requests still
// in flight and counting them apart.
func TestRunEndsWithinItsDurationPlusTheDrain(t *testing.T) {
	forEachClient(t, func(t *testing.T, client string) {
		metricsTimeout = 200 * time.Millisecond
		defer func() { metricsTimeout = 5 * time.Second }()
		cfg := baseConfig(silentServer(t), 2)
		cfg.HTTPClient = client
		cfg.Concurrency, cfg.Duration, cfg.HTTPTimeout, cfg.Drain = 3, time.Second, 30*time.Second, 300*time.Millisecond
		start := time.Now()
		res, err := Run(context.Background(), cfg)
		took := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		// 0.2 s metrics fetch before, 1 s run, 0.3 s drain, no fetch after (the one before failed).
		if took > 4*time.Second {
			t.Fatalf("a 1 s run with a 0.3 s drain took %v", took)
		}
		s := res.Summary
		if s.CutOffRequests != 3 || s.TotalRequests != 0 || res.Latency().Count() != 0 {
			t.Fatalf("cut off %d, requests %d: the three requests in flight are cut off and counted apart", s.CutOffRequests, s.TotalRequests)
		}
		if s.DurationSecs > 1.3+0.5 {
			t.Fatalf("duration %v s", s.DurationSecs)
		}
	})
}

func TestDrainIsBoundedByTheRequestTimeout(t *testing.T) {
	c, err := RunConfig{Users: testUsers(1), Requests: 1, HTTPTimeout: time.Second}.normalize()
	if err != nil || c.Drain != time.Second {
		t.Fatalf("drain %v %v", c.Drain, err)
	}
	c, err = RunConfig{Users: testUsers(1), Requests: 1}.normalize()
	if err != nil || c.Drain != DefaultDrain {
		t.Fatalf("drain %v %v", c.Drain, err)
	}
}

// TestRequestLimitedRunDoesNotWaitOutTheRampUp: with --duration 0 --requests N, workers still
// waiting for their ramp-up turn held the run open until the ramp ended after the N requests were
// done, so the duration (and req/s) counted the idle wait.
func TestRequestLimitedRunDoesNotWaitOutTheRampUp(t *testing.T) {
	f := newFakeServer(t, nil)
	cfg := baseConfig(f.URL, 2)
	cfg.Requests, cfg.Concurrency, cfg.RampUp = 20, 4, 5*time.Second
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Summary.TotalRequests != 20 || res.Summary.DurationSecs > 2 {
		t.Fatalf("%d requests in %.2f s: the run waited for the ramp-up after its requests were done", res.Summary.TotalRequests, res.Summary.DurationSecs)
	}
}
