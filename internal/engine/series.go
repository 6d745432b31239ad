package engine

import (
	"sort"
	"sync"

	"github.com/loadproof/loadproof/internal/result"
)

// DefaultMaxServerSeries is the number of distinct server series a run keeps when
// Config.MaxServerSeries is 0: far above the few dozen a LinkKeys or Keycast server exports, far
// below what would make a result grow by megabytes a second.
const DefaultMaxServerSeries = 2000

// CounterServerSeriesDropped is the interval counter that says how many series of that interval's
// server sample were dropped for the cap (Config.MaxServerSeries); its total over the run
// (Envelope.CounterTotal) is above zero exactly when a sample was cut, and reports say so.
const CounterServerSeriesDropped = result.CounterServerSeriesDropped

// seriesCap keeps the first max distinct series names a run's samples carry.
type seriesCap struct {
	mu   sync.Mutex
	max  int
	kept map[string]struct{}
}

func newSeriesCap(max int) *seriesCap {
	if max <= 0 {
		max = DefaultMaxServerSeries
	}
	return &seriesCap{max: max, kept: map[string]struct{}{}}
}

// limit returns m with only the admitted series and how many it dropped. Names already admitted
// are always kept; new names are admitted in sorted order while there is room, so which ones are
// kept does not depend on map order.
func (c *seriesCap) limit(m map[string]float64) (map[string]float64, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.kept) < c.max {
		var fresh []string
		for k := range m {
			if _, ok := c.kept[k]; !ok {
				fresh = append(fresh, k)
			}
		}
		if len(c.kept)+len(fresh) > c.max {
			sort.Strings(fresh)
			fresh = fresh[:c.max-len(c.kept)]
		}
		for _, k := range fresh {
			c.kept[k] = struct{}{}
		}
	}
	if len(m) <= len(c.kept) {
		all := true
		for k := range m {
			if _, ok := c.kept[k]; !ok {
				all = false
				break
			}
		}
		if all {
			return m, 0
		}
	}
	out := make(map[string]float64, min(len(m), len(c.kept)))
	var dropped int64
	for k, v := range m {
		if _, ok := c.kept[k]; ok {
			out[k] = v
		} else {
			dropped++
		}
	}
	return out, dropped
}
