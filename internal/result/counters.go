package result

// CounterTotal sums one driver counter over the run's intervals (server_series_dropped, late sends):
// what a report says about the whole run from the interval counters alone.
func (e *Envelope) CounterTotal(name string) int64 {
	var t int64
	for i := range e.Intervals {
		t += e.Intervals[i].Counters[name]
	}
	return t
}

// CounterServerSeriesDropped is the interval counter of server series dropped from that interval's
// sample because the run already kept as many distinct series as it may (the engine's
// MaxServerSeries): a target exposing thousands of series cannot grow a result without bound, and
// the report says what was left out.
const CounterServerSeriesDropped = "server_series_dropped"
