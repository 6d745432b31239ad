package profiling

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// MaxProfileBytes bounds a profile read from a pprof endpoint.
const MaxProfileBytes = 256 << 20

// Fetch GETs a pprof endpoint (a CPU profile blocks for its seconds parameter) with hc and returns
// the profile; any status other than 200 is an error quoting the start of the body.
func Fetch(ctx context.Context, hc *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("profiling: %w", err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("profiling: fetching %s: %w", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxProfileBytes))
	if err != nil {
		return nil, fmt.Errorf("profiling: reading %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("profiling: %s answered HTTP %d: %s", url, resp.StatusCode, strings.TrimSpace(string(b[:min(len(b), 200)])))
	}
	return b, nil
}

// WaitHealthy polls url with hc every 100 ms until it answers 200, ctx ends, or limit passes.
func WaitHealthy(ctx context.Context, hc *http.Client, url string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("profiling: %w", err)
		}
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("profiling: %s did not answer 200 within %s; is the server running?", url, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}
