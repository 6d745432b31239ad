package profiling

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sync/atomic"
	"testing"
	"time"
)

func TestCaptureWritesBothProfilesAroundTheRun(t *testing.T) {
	var seconds atomic.Value
	var heapStatus atomic.Int32
	heapStatus.Store(http.StatusOK)
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/profile", func(w http.ResponseWriter, r *http.Request) {
		seconds.Store(r.URL.Query().Get("seconds"))
		w.Write([]byte("cpu"))
	})
	mux.HandleFunc("/debug/pprof/heap", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(int(heapStatus.Load()))
		w.Write([]byte("heap"))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	dir := t.TempDir()
	c := Capture{PprofURL: srv.URL, Duration: 1500 * time.Millisecond,
		CPUPath: filepath.Join(dir, "cpu.pprof"), HeapPath: filepath.Join(dir, "heap.pprof"),
		Client: func(_ string, timeout time.Duration) (*http.Client, error) {
			return &http.Client{Timeout: timeout}, nil
		}}

	ran := false
	if err := c.Run(context.Background(), func(context.Context) error { ran = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if !ran {
		t.Fatal("run was not called")
	}
	if got := seconds.Load(); got != "2" {
		t.Errorf("CPU profile asked for seconds=%v; want 2 (1.5 s rounded up)", got)
	}
	for path, want := range map[string]string{c.CPUPath: "cpu", c.HeapPath: "heap"} {
		if b, err := os.ReadFile(path); err != nil || string(b) != want {
			t.Errorf("%s: %q, %v; want %q", path, b, err, want)
		}
	}

	boom := errors.New("boom")
	if err := c.Run(context.Background(), func(context.Context) error { return boom }); err != boom {
		t.Errorf("a failed run: %v; want the run's own error", err)
	}

	heapStatus.Store(http.StatusInternalServerError)
	err := c.Run(context.Background(), func(context.Context) error { return nil })
	var fe *FetchError
	if !errors.As(err, &fe) || fe.Which != "heap" {
		t.Errorf("heap answered 500: %v; want a *FetchError for the heap profile", err)
	}
}

func TestSelfWritesProfilesOfAFailedRunToo(t *testing.T) {
	dir := t.TempDir()
	cpu, heap := filepath.Join(dir, "cpu.pprof"), filepath.Join(dir, "heap.pprof")
	boom := errors.New("boom")
	runErr, err := Self(cpu, heap, func() error { return boom })
	if err != nil || runErr != boom {
		t.Fatalf("Self = %v, %v; want the run's error apart and no profile error", runErr, err)
	}
	for _, p := range []string{cpu, heap} {
		if fi, err := os.Stat(p); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v; want a profile", p, err)
		}
	}

	// A second profile while one runs is refused before the run starts.
	var busy bytes.Buffer
	if err := pprof.StartCPUProfile(&busy); err != nil {
		t.Skipf("the CPU profiler is in use: %v", err)
	}
	defer pprof.StopCPUProfile()
	ran := false
	_, err = Self(filepath.Join(dir, "cpu2.pprof"), filepath.Join(dir, "heap2.pprof"), func() error { ran = true; return nil })
	if !errors.Is(err, ErrCPUStart) || ran {
		t.Errorf("Self while profiling: %v (ran %v); want ErrCPUStart and no run", err, ran)
	}
}
