package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

func TestShareAndRangeTileExactly(t *testing.T) {
	for _, total := range []int64{0, 1, 7, 1000, 200000, 1_000_003} {
		for _, n := range []int{1, 2, 3, 11, 64} {
			var sum, next int64
			for _, s := range Split(n) {
				sum += s.Share(total)
				start, c := s.Range(total)
				if start != next {
					t.Fatalf("total %d n %d seg %v: start %d, want %d", total, n, s, start, next)
				}
				next = start + c
			}
			if sum != total || next != total {
				t.Fatalf("total %d n %d: sum %d end %d", total, n, sum, next)
			}
		}
	}
}

func TestSubSegmentsTileTheParent(t *testing.T) {
	const total = 100003
	parent := Segment{Index: 1, Count: 3}
	pStart, pCount := parent.Range(total)
	_ = pStart
	var sum int64
	for i := 0; i < 4; i++ {
		sum += parent.Sub(4, i).Share(total)
	}
	// 3 machines x 4 processes is a 12-way split of the whole run.
	var whole int64
	for _, s := range Split(12) {
		whole += s.Share(total)
	}
	if whole != total || sum <= 0 || sum > pCount+4 {
		t.Fatalf("sub-split sum %d (parent %d), whole %d", sum, pCount, whole)
	}
}

func TestZeroSegmentIsWhole(t *testing.T) {
	var s Segment
	if s.Share(10) != 10 || s.String() != "1/1" || s.Validate() != nil {
		t.Fatal("zero segment is not the whole run")
	}
	if (Segment{Index: 3, Count: 3}).Validate() == nil {
		t.Fatal("out of range segment accepted")
	}
}

func TestConstantPacerInterleaves(t *testing.T) {
	// Two segments at half rate with offsets interleave into the full-rate schedule.
	full := ConstantPacer{PerSecond: 1000}
	a := ConstantPacer{PerSecond: 500, Phase: Segment{Index: 0, Count: 2}.Offset()}
	b := ConstantPacer{PerSecond: 500, Phase: Segment{Index: 1, Count: 2}.Offset()}
	for n := int64(0); n < 100; n++ {
		if a.At(n) != full.At(2*n) || b.At(n) != full.At(2*n+1) {
			t.Fatalf("n=%d: %v %v vs %v %v", n, a.At(n), b.At(n), full.At(2*n), full.At(2*n+1))
		}
	}
}

func TestLinearPacerCountsMatchIntegral(t *testing.T) {
	p := LinearPacer{From: 100, To: 1100, Over: 10 * time.Second}
	// After the 10 s ramp, (100+1100)/2*10 = 6000 sends are due.
	if got := p.At(6000); math.Abs(got.Seconds()-10) > 1e-6 {
		t.Fatalf("send 6000 at %v, want 10s", got)
	}
	prev := time.Duration(-1)
	for n := int64(0); n < 8000; n++ {
		at := p.At(n)
		if at < prev {
			t.Fatalf("not monotone at %d", n)
		}
		prev = at
	}
	if got := p.At(7100); math.Abs(got.Seconds()-11) > 1e-6 {
		t.Fatalf("send 7100 at %v, want 11s", got)
	}
}

func TestScheduleStopsAtMaxAndKeepsIntendedTimes(t *testing.T) {
	start := time.Now()
	var got []Ticket
	for tk := range Schedule(context.Background(), start, ConstantPacer{PerSecond: 1e6}, 50, 0) {
		got = append(got, tk)
	}
	if len(got) != 50 {
		t.Fatalf("%d tickets", len(got))
	}
	for i, tk := range got {
		if tk.N != int64(i) || !tk.Intended.Equal(start.Add(ConstantPacer{PerSecond: 1e6}.At(int64(i)))) {
			t.Fatalf("ticket %d: %+v", i, tk)
		}
	}
}

func TestScheduleEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := Schedule(ctx, time.Now(), ConstantPacer{PerSecond: 1}, 0, 0)
	<-ch // ticket 0 is due at once
	cancel()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case _, open := <-ch:
			if !open {
				return
			}
		case <-deadline:
			t.Fatal("Schedule's channel still open 5 s after its context ended")
		}
	}
}

// The fan-out test re-runs this test binary as a worker.
func TestMain(m *testing.M) {
	if os.Getenv("ENGINE_TEST_WORKER") == "1" {
		seg := Segment{}
		seg.Index, _ = strconv.Atoi(os.Args[1])
		seg.Count, _ = strconv.Atoi(os.Args[2])
		if seg.Index == 2 && os.Getenv("ENGINE_TEST_FAIL") == "1" {
			os.Exit(3)
		}
		fmt.Printf("hello from %v\n", seg)
		b, _ := json.Marshal(map[string]int64{"share": seg.Share(1000)})
		if err := WriteResult(os.Args[3], b); err != nil {
			os.Exit(4)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runFan runs 4 workers and returns their results, error, stdout lines and the segments OnExit
// reported (in the order they ended).
func runFan(t *testing.T, fail bool) ([][]byte, error, []string, []int) {
	t.Helper()
	env := append(os.Environ(), "ENGINE_TEST_WORKER=1")
	if fail {
		env = append(env, "ENGINE_TEST_FAIL=1")
	}
	var mu sync.Mutex
	var lines []string
	var exits []int
	res, err := FanOut{
		Workers: 4,
		Env:     env,
		Args: func(seg Segment, path string) []string {
			return []string{strconv.Itoa(seg.Index), strconv.Itoa(seg.Count), path}
		},
		OnLine: func(seg Segment, line string) {
			mu.Lock()
			lines = append(lines, line)
			mu.Unlock()
		},
		OnExit: func(seg Segment) {
			mu.Lock()
			exits = append(exits, seg.Index)
			mu.Unlock()
		},
	}.Run(context.Background())
	slices.Sort(exits)
	return res, err, lines, exits
}

func TestFanOutMergesExactly(t *testing.T) {
	res, err, lines, exits := runFan(t, false)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, b := range res {
		var r map[string]int64
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		sum += r["share"]
	}
	if sum != 1000 || len(lines) != 4 || !slices.Equal(exits, []int{0, 1, 2, 3}) {
		t.Fatalf("sum %d lines %v exits %v", sum, lines, exits)
	}
}

func TestFanOutReportsFailedWorker(t *testing.T) {
	res, err, _, exits := runFan(t, true)
	var we *WorkerError
	if !errors.As(err, &we) || we.Segment.Index != 2 {
		t.Fatalf("error %v", err)
	}
	if !slices.Equal(exits, []int{0, 1, 2, 3}) { // a failed worker has ended too
		t.Fatalf("exits %v", exits)
	}
	if res[0] == nil || res[2] != nil {
		t.Fatal("results of good workers must be kept, the failed one's absent")
	}
}
