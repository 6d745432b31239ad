package profiling

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
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
