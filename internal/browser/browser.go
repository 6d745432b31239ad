// Package browser drives headless Chromium for the tests that check what loadproof's pages show:
// it opens a page with the network cut off (a dead proxy and a resolver that knows no name, so
// only the page itself and loopback addresses the test allows can load), collects console errors,
// uncaught exceptions and every request outside the allowed prefixes, waits for a condition the
// page sets itself (never a sleep), reads what the page reports about its charts, and takes
// full-page PNG screenshots.
//
// Only tests use it; it needs Debian's chromium (or CHROMIUM naming a Chrome binary).
package browser

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// ErrNoChromium reports that no Chromium binary was found.
var ErrNoChromium = errors.New("browser: no chromium found: install Debian's chromium (apt-get install chromium) or set CHROMIUM")

// ExecPath finds the browser: $CHROMIUM, then chromium, chromium-browser, google-chrome on PATH.
func ExecPath() (string, error) {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p, nil
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", ErrNoChromium
}

// Browser is one headless Chromium process.
type Browser struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// Start launches the browser; Close ends it.
func Start(ctx context.Context) (*Browser, error) {
	path, err := ExecPath()
	if err != nil {
		return nil, err
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true),
		chromedp.WindowSize(1280, 900),
		// The network is cut off: a proxy nobody listens on, and no name resolves. Loopback
		// bypasses the proxy, so a dashboard on 127.0.0.1 stays reachable.
		chromedp.Flag("proxy-server", "http://127.0.0.1:9"),
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"),
	)
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	bctx, bcancel := chromedp.NewContext(actx)
	if err := chromedp.Do(bctx); err != nil {
		bcancel()
		acancel()
		return nil, fmt.Errorf("browser: starting %s: %w", path, err)
	}
	return &Browser{ctx: bctx, cancel: func() { bcancel(); acancel() }}, nil
}

// Close ends the browser.
func (b *Browser) Close() { b.cancel() }

// Chart is what the page reports about one chart it drew (window.__lpCharts).
type Chart struct {
	ID     string   `json:"id"`
	Title  string   `json:"title"`
	Series []string `json:"series"`
	Points int      `json:"points"`
	Drawn  bool     `json:"drawn"`
	// NonNull counts each series' points that hold a value.
	NonNull []int `json:"nonNull"`
}

// Page is one open tab.
type Page struct {
	ctx    context.Context
	cancel context.CancelFunc
	allow  []string

	mu       sync.Mutex
	errs     []string
	requests []string
}

// Open opens url in a new tab and waits for it to load. allow lists the URL prefixes the page may
// request besides itself (data: and blob: URLs are always allowed).
func (b *Browser) Open(url string, allow ...string) (*Page, error) {
	tctx, cancel := chromedp.NewContext(b.ctx)
	p := &Page{ctx: tctx, cancel: cancel, allow: append([]string{url, "data:", "blob:"}, allow...)}
	if err := chromedp.Listen(tctx, p.onEvent); err != nil {
		cancel()
		return nil, fmt.Errorf("browser: %w", err)
	}
	msgs := chromedp.Console(tctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.IsException() || m.Type == "error" || m.Type == "assert" {
				p.mu.Lock()
				p.errs = append(p.errs, m.String())
				p.mu.Unlock()
			}
		}
	}()
	if err := chromedp.Do(tctx, chromedp.Navigate(url)); err != nil {
		cancel()
		return nil, fmt.Errorf("browser: opening %s: %w", url, err)
	}
	return p, nil
}

func (p *Page) onEvent(ev any) {
	if e, ok := ev.(*network.EventRequestWillBeSent); ok && e.Request != nil {
		u := e.Request.URL
		for _, a := range p.allow {
			if strings.HasPrefix(u, a) {
				return
			}
		}
		p.mu.Lock()
		p.requests = append(p.requests, u)
		p.mu.Unlock()
	}
}

// Close closes the tab.
func (p *Page) Close() { p.cancel() }

// Errors returns the console errors and uncaught exceptions so far.
func (p *Page) Errors() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.errs...)
}

// Requests returns the requests the page made outside the allowed prefixes.
func (p *Page) Requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.requests...)
}

// Wait waits until the JavaScript expression is truthy, for at most timeout.
func (p *Page) Wait(expr string, timeout time.Duration) error {
	_, err := chromedp.Run(p.ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(timeout), chromedp.WithPollingInterval(100*time.Millisecond)))
	if err != nil {
		return fmt.Errorf("browser: waiting for %s: %w", expr, err)
	}
	return nil
}

// Eval evaluates a JavaScript expression into v's type.
func Eval[T any](p *Page, expr string) (T, error) {
	return chromedp.Run(p.ctx, chromedp.Evaluate[T](expr))
}

// Charts returns what the page reports about its charts.
func (p *Page) Charts() ([]Chart, error) {
	return Eval[[]Chart](p, `window.__lpCharts || []`)
}

// Screenshot writes a full-page PNG screenshot to path.
func (p *Page) Screenshot(path string) error {
	png, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		return fmt.Errorf("browser: screenshot: %w", err)
	}
	return os.WriteFile(path, png, 0o644)
}
