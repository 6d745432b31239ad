package profiling

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/loadproof/loadproof/internal/atomicfile"
)

// Capture profiles a server over one run through its net/http/pprof endpoint: a CPU profile that
// starts with the run and lasts Duration, then a heap profile once the run has ended. Both are
// written to their paths (atomically, mode 0644). Its zero value is not usable: PprofURL, Duration,
// the paths and Client are required.
type Capture struct {
	// PprofURL is the server's net/http/pprof base URL, e.g. http://127.0.0.1:6060 (no trailing /).
	PprofURL string
	// Duration is the CPU profile's length, the run's (rounded up to whole seconds, as pprof takes it).
	Duration time.Duration
	// CPUPath and HeapPath are where the profiles are written.
	CPUPath, HeapPath string
	// Client returns the HTTP client for a fetch of url that may take up to timeout: the caller owns
	// the transport (a private CA, say).
	Client func(url string, timeout time.Duration) (*http.Client, error)
}

// FetchError is a profile the server did not hand over: Which is "CPU" or "heap".
type FetchError struct {
	Which, PprofURL string
	Err             error
}

func (e *FetchError) Error() string {
	return fmt.Sprintf("%s profile from %s: %v", e.Which, e.PprofURL, e.Err)
}

func (e *FetchError) Unwrap() error { return e.Err }

// fetchSlack is how long a fetch may take beyond the profile it asks for: the server writes the
// profile after its seconds are up, and a heap profile is a snapshot.
const fetchSlack = 30 * time.Second

// Run fetches the CPU profile while run runs, then the heap profile, and writes both. An error of
// run is returned as it is (the fetch in flight is abandoned); a profile not handed over is a
// *FetchError; a profile not written is the write's error.
func (c Capture) Run(ctx context.Context, run func(context.Context) error) error {
	secs := int64(math.Ceil(c.Duration.Seconds()))
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type fetched struct {
		b   []byte
		err error
	}
	cpuc := make(chan fetched, 1)
	go func() {
		b, err := c.fetch(fctx, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", c.PprofURL, secs), time.Duration(secs)*time.Second+fetchSlack)
		cpuc <- fetched{b, err}
	}()
	if err := run(ctx); err != nil {
		return err
	}
	cpu := <-cpuc
	if cpu.err != nil {
		return &FetchError{Which: "CPU", PprofURL: c.PprofURL, Err: cpu.err}
	}
	if err := atomicfile.Write(c.CPUPath, cpu.b, 0o644); err != nil {
		return err
	}
	heap, err := c.fetch(ctx, c.PprofURL+"/debug/pprof/heap", fetchSlack)
	if err != nil {
		return &FetchError{Which: "heap", PprofURL: c.PprofURL, Err: err}
	}
	return atomicfile.Write(c.HeapPath, heap, 0o644)
}

func (c Capture) fetch(ctx context.Context, url string, timeout time.Duration) ([]byte, error) {
	hc, err := c.Client(url, timeout)
	if err != nil {
		return nil, err
	}
	return Fetch(ctx, hc, url)
}

// ErrNoGo: Top needs the go command and it is not on PATH.
var ErrNoGo = errors.New("profiling: go is not on PATH")

// Top returns `go tool pprof -top` of a profile, its n heaviest functions: the quick look a person
// takes before opening the flame graph. It needs a Go toolchain (ErrNoGo without one).
func Top(ctx context.Context, profile string, n int) ([]byte, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return nil, ErrNoGo
	}
	return exec.CommandContext(ctx, goBin, "tool", "pprof", "-top", fmt.Sprintf("-nodecount=%d", n), profile).Output()
}

// ErrCPUStart: the CPU profiler of this process would not start (another profile is running).
var ErrCPUStart = errors.New("starting the CPU profile")

// Self profiles this process over run: its CPU profile while run runs goes to cpuPath, then, after
// a collection, its heap profile to heapPath. run's own error comes back apart (runErr), since the
// profiles of a failed run are still written; err is a profile that could not be taken or written
// (ErrCPUStart when the profiler would not start).
func Self(cpuPath, heapPath string, run func() error) (runErr, err error) {
	cpuFile, err := os.Create(cpuPath)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(cpuFile); err != nil {
		cpuFile.Close()
		return nil, fmt.Errorf("%w: %w", ErrCPUStart, err)
	}
	runErr = run()
	pprof.StopCPUProfile()
	if err := cpuFile.Close(); err != nil {
		return runErr, err
	}
	runtime.GC()
	heapFile, err := os.Create(heapPath)
	if err != nil {
		return runErr, err
	}
	err = pprof.Lookup("heap").WriteTo(heapFile, 0)
	if cerr := heapFile.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return runErr, fmt.Errorf("heap profile: %w", err)
	}
	return runErr, nil
}
