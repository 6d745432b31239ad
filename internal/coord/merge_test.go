package coord

import (
	"io"
	"math"
	"strings"
	"testing"

	"github.com/loadproof/loadproof/internal/result"
)

func newTestTask(workers int) *taskState {
	return &taskState{id: 1, seen: make([]int, workers), finished: make([]bool, workers), events: make(chan any, 4), progress: io.Discard}
}

// send hands worker i's next interval to the merge: n successes, the held gauge at held, a
// server sample of held (only worker 0 samples the server, as the LinkKeys workers do).
func send(ts *taskState, i int, t, secs float64, n, held int64) {
	iv := &result.Interval{T: t, Secs: secs, Counts: map[string]int64{"success": n}, Counters: map[string]int64{"closed": n},
		Gauges: map[string]int64{"held": held}}
	if i == 0 {
		iv.Server = map[string]float64{"open_connections": float64(held)}
	}
	ts.add(nil, &Snapshot{Index: i, Task: 1, Seq: ts.seen[i], Interval: ToWire(iv), State: "running"})
}

func TestLiveMergeSumsGaugesAtTheSameInstant(t *testing.T) {
	t.Parallel()
	ts := newTestTask(2)
	// Worker 0 sends 100 ms snapshots; worker 1 delivered one tick late (0.1–0.3 s as one), and
	// jitters by a millisecond.
	send(ts, 0, 0, 0.1, 1, 10)
	send(ts, 0, 0.1, 0.1, 1, 20)
	send(ts, 0, 0.2, 0.1, 1, 30)
	send(ts, 0, 0.3, 0.1, 1, 30)
	if ts.next != 0 {
		t.Fatalf("%d intervals complete before worker 1 sent any", ts.next)
	}
	send(ts, 1, 0.001, 0.099, 2, 5)
	send(ts, 1, 0.1, 0.2, 4, 7) // 0.1–0.3: its last reading is at 0.3
	if ts.next != 3 {
		t.Fatalf("%d intervals complete, want 3 (worker 1 has reached 0.3 s, not the middle of 0.3–0.4)", ts.next)
	}
	send(ts, 1, 0.3, 0.1, 1, 7)
	if ts.next != 4 || len(ts.merged) != 4 {
		t.Fatalf("%d of %d intervals complete, want 4 of 4", ts.next, len(ts.merged))
	}
	var n, closed int64
	for _, iv := range ts.merged {
		n += iv.Counts["success"]
		closed += iv.Counters["closed"]
	}
	if n != 4+7 || closed != n {
		t.Fatalf("merged %d successes and %d closes, want 11 and 11", n, closed)
	}
	// Worker 1's reading at 0.3 s is its state at the end of 0.1–0.2 and of 0.2–0.3 both.
	for k, want := range []int64{15, 27, 37, 37} {
		if got := ts.merged[k].Gauges["held"]; got != want {
			t.Errorf("interval %d: held %d, want %d", k, got, want)
		}
	}
	if ts.merged[1].Secs != 0.2 || ts.merged[1].Server["open_connections"] != 20 || ts.merged[3].Server["open_connections"] != 30 {
		t.Fatalf("interval 1 lasts %g s with sample %v; interval 3's sample %v", ts.merged[1].Secs, ts.merged[1].Server, ts.merged[3].Server)
	}
}

func TestLiveMergeJoinsFineSnapshotsIntoASecond(t *testing.T) {
	t.Parallel()
	ts := newTestTask(2)
	// Past engine.FineFor the workers join their 100 ms snapshots into seconds; worker 1 got its
	// tick at 30 s late, so its last fine snapshot runs to 30.1 s and its seconds start there.
	send(ts, 0, 29.8, 0.1, 1, 50)
	send(ts, 0, 29.9, 0.1, 1, 50)
	send(ts, 0, 30.0, 1, 10, 50)
	send(ts, 0, 31.0, 1, 10, 48)
	send(ts, 1, 29.8, 0.1, 1, 40)
	send(ts, 1, 29.9, 0.2, 2, 41)
	send(ts, 1, 30.1, 1, 10, 42)
	if ts.next != 3 || len(ts.merged) != 4 {
		t.Fatalf("%d of %d intervals complete, want 3 of 4", ts.next, len(ts.merged))
	}
	send(ts, 1, 31.1, 1, 10, 43)
	want := []struct {
		t, secs    float64
		n, held    int64
		serverOpen float64
	}{{29.8, 0.1, 2, 90, 50}, {29.9, 0.2, 3, 91, 50}, {30.0, 1, 20, 92, 50}, {31.0, 1, 20, 91, 48}}
	for k, w := range want {
		iv := ts.merged[k]
		if iv.T != w.t || math.Abs(iv.Secs-w.secs) > 1e-9 || iv.Counts["success"] != w.n || iv.Gauges["held"] != w.held || iv.Server["open_connections"] != w.serverOpen {
			t.Errorf("interval %d: t %g secs %g counts %v gauges %v server %v; want %+v", k, iv.T, iv.Secs, iv.Counts, iv.Gauges, iv.Server, w)
		}
	}
}

func TestLiveMergeRefusesWhatNoRunSends(t *testing.T) {
	t.Parallel()
	ts := newTestTask(2)
	for _, bad := range []float64{math.NaN(), math.Inf(1), -1} {
		send(ts, 0, bad, 1, 1, 1)
	}
	send(ts, 0, 0, 1, 1, 1)
	// A repeat or a stray is dropped.
	ts.add(nil, &Snapshot{Index: 0, Task: 1, Seq: 0, Interval: ToWire(&result.Interval{T: 0, Secs: 1, Counts: map[string]int64{"success": 5}}), State: "running"})
	if len(ts.merged) != 1 || ts.merged[0].Counts["success"] != 1 {
		t.Fatalf("merged %+v", ts.merged)
	}
	// Worker 1 has sent nothing: nothing is complete until it delivers its result.
	if ts.next != 0 {
		t.Fatalf("%d complete without worker 1", ts.next)
	}
	ts.finish(nil, 1)
	if ts.next != 1 {
		t.Fatalf("%d complete after worker 1 finished, want 1", ts.next)
	}
}

// FuzzLiveMerge: whatever intervals workers send, in whatever times and lengths, the merge keeps
// every count of the ones it takes, opens no more merged intervals than it took, and its gauges
// stay within what the workers read.
func FuzzLiveMerge(f *testing.F) {
	f.Add([]byte{0, 0, 10, 1, 1, 0, 10, 1, 0, 10, 10, 2, 1, 20, 10, 3})
	f.Add([]byte{0, 255, 255, 9, 1, 0, 0, 9, 0, 3, 1, 1, 1, 3, 200, 7})
	f.Fuzz(func(t *testing.T, b []byte) {
		const workers = 3
		ts := newTestTask(workers)
		var took, held int64
		for ; len(b) >= 4; b = b[4:] {
			i := int(b[0]) % workers
			tt, secs, n := float64(b[1])/10, float64(b[2])/100, int64(b[3])
			seq := ts.seen[i]
			send(ts, i, tt, secs, n, n)
			if ts.seen[i] == seq+1 {
				took += n
				held += n
			}
		}
		var got int64
		for k, iv := range ts.merged {
			got += iv.Counts["success"]
			if g := iv.Gauges["held"]; g < 0 || g > held {
				t.Fatalf("interval %d: held %d, outside 0..%d", k, g, held)
			}
		}
		if got != took || len(ts.merged) > int(took)+len(ts.seen)*256 {
			t.Fatalf("merged %d of %d counted, in %d intervals", got, took, len(ts.merged))
		}
	})
}

func TestLiveMergePrintsALineASecond(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	ts := newTestTask(1)
	ts.progress, ts.opts.Describe = &out, "linkkeys connections"
	for j := range 25 {
		send(ts, 0, float64(j)/10, 0.1, 3, 0)
	}
	ts.finish(nil, 0)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "coordinate: linkkeys connections t=1s  30 ops (+30, 30/s)") ||
		!strings.HasPrefix(lines[2], "coordinate: linkkeys connections t=2s  75 ops (+15, 30/s)") {
		t.Fatalf("progress lines:\n%s", out.String())
	}
}
