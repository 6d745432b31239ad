// Package dashboard serves a run's report live: the same self-contained page `loadproof report
// --format html` writes, fed by server-sent events, one per interval snapshot as the engine closes
// it. When the run ends the page receives the final report (drawn from the files the run wrote)
// and can save itself as a report file.
//
// It is read-only (GET only: the page, its event stream, and the final report once there is one)
// and binds to loopback unless the address names a host. A page that connects late gets every
// interval so far, then the live ones. Every request passes localhttp's guard: a Host that does
// not name this server is refused (no DNS rebinding), a token is required when one is set, and
// the security headers and the page's CSP are sent. At most MaxEventClients pages follow the run
// at once (Options.MaxClients); more get 503.
//
// Hook it to engine runs with engine.WithIntervalObserver(ctx, d.Interval) or a driver's
// OnInterval; each part of a run whose intervals count from zero again (a capacity phase) is laid
// after the one before on the page's time axis.
package dashboard

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/loadproof/loadproof/internal/localhttp"
	"github.com/loadproof/loadproof/internal/report"
	"github.com/loadproof/loadproof/internal/result"
)

// EventsPath is where the page reads its events.
const EventsPath = "/events"

// MaxEventClients is how many event streams are served at once by default: each holds a
// connection and a goroutine for the whole run.
const MaxEventClients = 16

// Dashboard is a running dashboard server.
type Dashboard struct {
	ln      net.Listener
	srv     *http.Server
	log     *slog.Logger
	started time.Time

	mu       sync.Mutex
	feed     *report.LiveFeed
	page     []byte
	events   [][]byte
	final    []byte
	finalPg  []byte
	wake     chan struct{}
	lastT    float64
	parts    int
	clients  int
	finished int // clients that have been sent the final event
	max      int // event streams served at once
	token    string
}

// Options describe the run the dashboard shows.
type Options struct {
	// Addr is HOST:PORT or :PORT (loopback); port 0 picks a free one.
	Addr string
	// Title heads the page.
	Title string
	// Harness, Command and Target describe the run.
	Harness, Command, Target string
	// Token, when set, must come with every request: ?token= on the first load (the page's own
	// requests then carry a cookie). TokenURL is the address to open.
	Token string
	// MaxClients caps the event streams served at once; 0 means MaxEventClients.
	MaxClients int
	// Planned is the run's planned length and TargetRate the rate it aims at (operations per
	// second); 0 where not known. The page shows elapsed against planned and draws the target.
	Planned    time.Duration
	TargetRate float64
	// Logger receives the server's errors and the warning about a non-loopback address; nil
	// discards them.
	Logger *slog.Logger
}

// LoopbackAddr makes an address without a host bind to loopback: ":8080" becomes
// "127.0.0.1:8080". A host given stays.
func LoopbackAddr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("dashboard: address %q: want HOST:PORT or :PORT: %w", addr, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// Start listens and serves the dashboard.
func Start(o Options) (*Dashboard, error) {
	addr, err := LoopbackAddr(o.Addr)
	if err != nil {
		return nil, err
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if o.MaxClients < 0 {
		return nil, fmt.Errorf("dashboard: MaxClients %d: want 0 (the default, %d) or more", o.MaxClients, MaxEventClients)
	}
	d := &Dashboard{log: log, started: time.Now(), feed: report.NewLiveFeed(o.Harness, o.Command, o.Target), wake: make(chan struct{}),
		max: cmp.Or(o.MaxClients, MaxEventClients), token: o.Token}
	if o.Planned < 0 || o.TargetRate < 0 || math.IsNaN(o.TargetRate) || math.IsInf(o.TargetRate, 0) {
		return nil, fmt.Errorf("dashboard: planned %v, target rate %v: want 0 (not known) or more", o.Planned, o.TargetRate)
	}
	d.feed.SetPlan(o.Planned, o.TargetRate)
	if d.page, err = d.feed.Page(o.Title, EventsPath); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	d.ln = ln
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", d.servePage)
	mux.HandleFunc("GET "+EventsPath, d.serveEvents)
	mux.HandleFunc("GET /report.html", d.serveFinal)
	guarded, err := localhttp.Guard(localhttp.Config{Name: "dashboard", Bound: ln.Addr(), Token: o.Token,
		CSP: report.PageCSP, Logger: log}, readOnly(mux))
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	d.srv = &http.Server{Handler: guarded, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := d.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("dashboard server stopped", "err", err)
		}
	}()
	return d, nil
}

// readOnly refuses every method but GET and HEAD.
func readOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "the dashboard is read-only", http.StatusMethodNotAllowed)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// URL is the page's address, without the token.
func (d *Dashboard) URL() string { return "http://" + d.ln.Addr().String() + "/" }

// TokenURL is the address to open: URL with the token, when there is one. Print it for the
// person running the tool only; never write it to a result file.
func (d *Dashboard) TokenURL() string { return localhttp.WithToken(d.URL(), d.token) }

// Interval adds one interval snapshot (engine.WithIntervalObserver's fn). An interval that starts
// no later than the one before begins a new part of the run, laid after the parts so far.
func (d *Dashboard) Interval(iv *result.Interval) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.final != nil {
		return
	}
	if d.parts == 0 || iv.T <= d.lastT && len(d.events) > 0 {
		if d.parts > 0 {
			// The new part started iv.T+iv.Secs ago on the wall clock.
			d.feed.StartPart(time.Since(d.started).Seconds() - (iv.T + iv.Secs))
		}
		d.parts++
	}
	d.lastT = iv.T
	ev, err := d.feed.Event(iv)
	if err != nil {
		d.log.Error("dashboard: dropping an interval", "err", err)
		return
	}
	d.events = append(d.events, ev)
	d.broadcast()
}

func (d *Dashboard) broadcast() {
	close(d.wake)
	d.wake = make(chan struct{})
}

// Finish sends the final report to every page and keeps it for pages that connect later.
func (d *Dashboard) Finish(m *report.Model) error {
	b, err := report.ModelJSON(m)
	if err != nil {
		return err
	}
	page, err := report.Page(m)
	if err != nil {
		return err
	}
	d.mu.Lock()
	d.final, d.finalPg = b, page
	d.broadcast()
	d.mu.Unlock()
	return nil
}

// Linger keeps serving the final report (the page, /report.html) after the run, for pages opened
// late, until linger has passed or ctx ends (an interrupt); it returns at once when linger is 0.
func (d *Dashboard) Linger(ctx context.Context, linger time.Duration) {
	if linger <= 0 {
		return
	}
	t := time.NewTimer(linger)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// Close waits, until ctx ends, for the pages connected now to receive the final report, then shuts
// the server down.
func (d *Dashboard) Close(ctx context.Context) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		d.mu.Lock()
		done := d.final == nil || d.finished >= d.clients
		d.mu.Unlock()
		if done {
			break
		}
		select {
		case <-ctx.Done():
			return d.srv.Close()
		case <-tick.C:
		}
	}
	if err := d.srv.Shutdown(ctx); err != nil {
		return d.srv.Close()
	}
	return nil
}

func (d *Dashboard) servePage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(d.page)
}

func (d *Dashboard) serveFinal(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	page := d.finalPg
	d.mu.Unlock()
	if page == nil {
		http.Error(w, "the run has not ended yet; the live page is at /", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="report.html"`)
	_, _ = w.Write(page)
}

// serveEvents streams every interval so far, then each new one, then the final report.
func (d *Dashboard) serveEvents(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	d.mu.Lock()
	if d.clients >= d.max {
		d.mu.Unlock()
		w.Header().Set("Retry-After", "10")
		http.Error(w, fmt.Sprintf("dashboard: %d pages are already following this run (the most served at once); close one and reload", d.max),
			http.StatusServiceUnavailable)
		return
	}
	d.clients++
	d.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	sent, gotFinal := 0, false
	defer func() {
		d.mu.Lock()
		d.clients--
		if gotFinal {
			d.finished--
		}
		d.mu.Unlock()
	}()
	keepalive := time.NewTicker(15 * time.Second)
	defer keepalive.Stop()
	for {
		d.mu.Lock()
		evs, final, wake := d.events[sent:], d.final, d.wake
		d.mu.Unlock()
		for _, e := range evs {
			if _, err := fmt.Fprintf(w, "event: row\ndata: %s\n\n", e); err != nil {
				return
			}
		}
		sent += len(evs)
		if final != nil {
			_, err := fmt.Fprintf(w, "event: final\ndata: %s\n\n", final)
			fl.Flush()
			if err == nil {
				d.mu.Lock()
				d.finished++
				d.mu.Unlock()
				gotFinal = true
			}
			// Stay until the page closes the stream, so Close knows it was delivered.
			select {
			case <-r.Context().Done():
			case <-time.After(time.Minute):
			}
			return
		}
		fl.Flush()
		select {
		case <-wake:
		case <-keepalive.C:
			if _, err := fmt.Fprint(w, ": keepalive\n\n"); err != nil {
				return
			}
		case <-r.Context().Done():
			return
		}
	}
}
