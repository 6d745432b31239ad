package linkkeysload

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/engine"
	"github.com/loadproof/loadproof/internal/result"
)

// TestRunSpecCoordinatedWorker: a coordinated worker runs its part of the spec's segment (the
// segment split again), waits for the start instant, hands its interval snapshots to the
// context's observer, and returns the result instead of writing a file.
func TestRunSpecCoordinatedWorker(t *testing.T) {
	s := newFakeServer(t).start()
	cfg := DDoSConfig{Target: s.target, Sources: 41, Concurrency: 4, AttemptTimeout: 5 * time.Second,
		Base: mustIP("127.0.20.0"), ProgressEvery: 1000}
	b, err := json.Marshal(WorkerSpec{Command: CmdDDoS, Segment: engine.Segment{Index: 1, Count: 2}, DDoS: &cfg})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var observed int64
	ctx := engine.WithIntervalObserver(context.Background(), func(iv *result.Interval) {
		mu.Lock()
		observed += iv.Total()
		mu.Unlock()
	})
	start := time.Now().Add(300 * time.Millisecond)
	res, err := RunSpec(ctx, string(b), io.Discard, SpecOptions{Split: engine.Segment{Index: 2, Count: 3}, Start: start})
	if err != nil {
		t.Fatal(err)
	}
	want := engine.Segment{Index: 1, Count: 2}.Sub(3, 2) // part 3 of 3 of segment 2 of 2
	if len(res.Segments) != 1 || res.Segments[0] != want {
		t.Fatalf("segments %v; want [%v]", res.Segments, want)
	}
	if n := want.Share(41); res.Attempts.Attempted != n {
		t.Errorf("%d attempts; segment %v owns %d", res.Attempts.Attempted, want, n)
	}
	if res.StartedAt.Before(start) {
		t.Errorf("the run started at %s, before the start instant %s", res.StartedAt.Format(time.RFC3339Nano), start.Format(time.RFC3339Nano))
	}
	mu.Lock()
	defer mu.Unlock()
	if observed != res.Attempts.Attempted {
		t.Errorf("the observer saw %d attempts in the snapshots; the run made %d", observed, res.Attempts.Attempted)
	}
}

// TestRemoteRunsTheWholeSpec: with Run.Remote the client hands one spec of its whole share to the
// remote runner, draws its seed progress lines from the merged snapshots the runner hands to the
// context's observer, and merges the segments' results as its own.
func TestRemoteRunsTheWholeSpec(t *testing.T) {
	s := newFakeServer(t).start()
	cfg := DDoSConfig{Target: s.target, Sources: 30, Concurrency: 6, AttemptTimeout: 5 * time.Second,
		Base: mustIP("127.0.21.0"), ProgressEvery: 5}
	var out strings.Builder
	var got WorkerSpec
	remote := func(ctx context.Context, spec string) ([][]byte, error) {
		if err := json.Unmarshal([]byte(spec), &got); err != nil {
			return nil, err
		}
		obs := engine.IntervalObserver(ctx)
		if obs == nil {
			t.Fatal("no interval observer reaches the remote runner")
		}
		parts := make([][]byte, 3)
		for i := range 3 {
			r, err := RunSpec(context.Background(), spec, io.Discard, SpecOptions{Split: engine.Segment{Index: i, Count: 3}})
			if err != nil {
				return nil, err
			}
			// One merged snapshot per segment, as a coordinator would hand them on.
			obs(&result.Interval{T: float64(i), Secs: 1, Counts: map[string]int64{result.ClassSuccess: r.Attempts.Succeeded, "tls_handshake_error_or_server_reject": r.Attempts.Failed}})
			if parts[i], err = json.Marshal(r); err != nil {
				return nil, err
			}
		}
		return parts, nil
	}
	res, err := DDoS(context.Background(), cfg, Run{Stdout: &out, Workers: 3, Remote: remote, Segment: engine.Segment{Index: 0, Count: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if got.Segment != (engine.Segment{Index: 0, Count: 2}) {
		t.Errorf("the remote spec's segment is %v; want the command's own 1/2", got.Segment)
	}
	if want := (engine.Segment{Index: 0, Count: 2}).Share(30); res.Attempts.Attempted != want || len(res.Segments) != 3 {
		t.Errorf("merged %d attempts over %d segments; want %d over 3", res.Attempts.Attempted, len(res.Segments), want)
	}
	// Each segment owns 5 of the command's 15 sources: one line per merged snapshot.
	for _, n := range []string{"5", "10", "15"} {
		if !strings.Contains(out.String(), "  progress: attempted="+n+" allowed=") {
			t.Errorf("no progress line at %s attempts from the merged snapshots:\n%s", n, out.String())
		}
	}
}
