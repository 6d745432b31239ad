package report

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/result"
)

// LiveFeed turns a run's interval snapshots, as they close, into the live dashboard's events: the
// same rows the static report folds into its series, and the headline so far. The dashboard's
// page is this package's page with Model.Live set; the events append to it. A LiveFeed is not
// safe for concurrent use.
type LiveFeed struct {
	run     RunView
	plan    LiveView
	tl      timeline
	running map[string]float64
	offset  float64
	lastT   float64
	totals  map[string]int64
	hists   map[string]*hist.Histogram
}

// NewLiveFeed starts the feed of a run of harness and command against target.
func NewLiveFeed(harness, command, target string) *LiveFeed {
	return &LiveFeed{run: RunView{Label: "live", Harness: harness, Command: command, Target: target},
		tl:      timeline{attempts: attemptRun(harness, command, nil)},
		running: map[string]float64{}, totals: map[string]int64{}, hists: map[string]*hist.Histogram{}}
}

// Page is the dashboard's page: title, the run's description and no data yet; the script reads
// events from the URL path events.
func (f *LiveFeed) Page(title, events string) ([]byte, error) {
	rv := f.run
	lv := f.plan
	lv.Events = events
	return Page(&Model{Title: title, Mode: "live", Runs: []*RunView{&rv}, Live: &lv})
}

// SetPlan tells the page the run's planned length and target rate (operations per second), 0
// where there is none; call it before Page.
func (f *LiveFeed) SetPlan(planned time.Duration, targetRate float64) {
	f.plan.PlannedSecs, f.plan.TargetRate = num(max(planned.Seconds(), 0)), num(max(targetRate, 0))
}

// StartPart begins a new part of the run's time axis (a capacity phase) at offset seconds: its
// intervals count from their own start again, and its server counters start afresh.
func (f *LiveFeed) StartPart(offset float64) {
	f.offset = max(offset, f.lastT)
	f.tl = timeline{attempts: f.tl.attempts}
	f.running = map[string]float64{}
}

// liveEvent is one "row" event.
type liveEvent struct {
	Run      int      `json:"run"`
	Row      Row      `json:"row"`
	Headline Headline `json:"headline"`
}

// Event reduces one interval to the event the page appends, with the headline figures of the run
// so far.
func (f *LiveFeed) Event(iv *result.Interval) ([]byte, error) {
	row := f.tl.row(iv, f.offset, f.running)
	f.lastT = float64(row.T)
	for k, v := range iv.Counts {
		f.totals[k] += v
	}
	for k, h := range iv.Latency {
		if f.hists[k] == nil {
			f.hists[k] = hist.New()
		}
		f.hists[k].Merge(h)
	}
	hl := headlineOf(f.totals, f.hists, time.Duration(f.lastT*float64(time.Second)), nil, nil)
	b, err := json.Marshal(liveEvent{Row: row, Headline: hl})
	if err != nil {
		return nil, fmt.Errorf("report: encoding a live event: %w", err)
	}
	return b, nil
}

// ModelJSON is the model as the page embeds it: the dashboard's "final" event carries it.
func ModelJSON(m *Model) ([]byte, error) { return encodeModel(m) }
