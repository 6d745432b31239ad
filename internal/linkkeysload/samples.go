package linkkeysload

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"

	"github.com/loadproof/loadproof/internal/boundedfile"
	"github.com/loadproof/loadproof/internal/linkkeys"
)

// Server samples: every interval snapshot of a run carries the server's own counters and gauges
// when they can be read, through the engine's Config.Sample. A Prometheus endpoint (the info file's
// metrics_addr, or --server-metrics http://…) is scraped once per interval; a METRICS log
// (--server-metrics FILE) gives the newest line written since the previous sample, so an interval in
// which the server printed nothing has no sample. In a fanned-out run only the first segment samples:
// samples of one server merge by summing, and one reading per interval is what the server holds.

// serverSampler returns the engine's Sample function for src, or nil when there is none.
func serverSampler(src *MetricsSource) func(context.Context) (map[string]float64, error) {
	if src == nil || src.Location == "" {
		return nil
	}
	if src.IsURL() {
		return func(ctx context.Context) (map[string]float64, error) {
			s, err := src.scrape(ctx)
			if err != nil {
				return nil, err
			}
			return sampleOf(s), nil
		}
	}
	t := &logTail{path: src.Location, offset: -1}
	return t.sample
}

// sampleOf flattens a reading into the interval's server sample: every field of the METRICS line's
// field table the reading carries, by its METRICS name (process_rss_bytes unless null, the appended
// fields unless absent), and the extra numeric ones (a Prometheus scrape's snapshot_cache_hits and
// friends) except the Go runtime's and the process collector's (go_*, process_*: dozens of series a
// timeline does not need; the RSS is process_rss_bytes).
func sampleOf(s linkkeys.MetricsLine) map[string]float64 {
	m := map[string]float64{}
	for _, f := range linkkeys.MetricsFields() {
		if v, ok := f.Value(&s); ok {
			m[f.Name] = float64(v)
		}
	}
	for k, v := range s.Extra {
		if _, taken := m[k]; !taken && !strings.HasPrefix(k, "go_") && !strings.HasPrefix(k, "process_") {
			m[k] = v
		}
	}
	return m
}

// logTail reads a METRICS log incrementally: each sample reads what was appended since the last one.
type logTail struct {
	mu     sync.Mutex
	path   string
	offset int64 // -1 until the first read, which starts at the end of the file as it was
}

func (t *logTail) sample(context.Context) (map[string]float64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f, err := boundedfile.OpenRegular(t.path, boundedfile.MetricsLog)
	if err != nil {
		return nil, errorf("reading server METRICS log %s: %w", t.path, err)
	}
	defer f.Close()
	if t.offset < 0 {
		// The newest line already written stands for the start of the run.
		fi, err := f.Stat()
		if err != nil {
			return nil, errorf("reading server METRICS log %s: %w", t.path, err)
		}
		t.offset = max(fi.Size()-int64(linkkeys.MaxMetricsLineBytes)-1, 0)
	}
	if _, err := f.Seek(t.offset, io.SeekStart); err != nil {
		return nil, errorf("reading server METRICS log %s: %w", t.path, err)
	}
	b, err := io.ReadAll(io.LimitReader(f, 16<<20))
	if err != nil {
		return nil, errorf("reading server METRICS log %s: %w", t.path, err)
	}
	end := bytes.LastIndexByte(b, '\n')
	if end < 0 {
		return nil, nil // nothing complete since the last sample
	}
	t.offset += int64(end + 1)
	lines := strings.Split(string(b[:end]), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], linkkeys.MetricsPrefix) {
			s, err := linkkeys.ParseMetricsLine(lines[i])
			if err != nil {
				return nil, errorf("reading server METRICS log %s: %w", t.path, err)
			}
			return sampleOf(s), nil
		}
	}
	return nil, nil
}
