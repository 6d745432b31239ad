// Package profiling captures pprof profiles of a server under load (Capture: through its
// net/http/pprof endpoint, over a run; Self: of this process, for a server run in it) and turns
// them into things a person opens in a browser without a Go toolchain or graphviz: a self-contained flame graph page (pprof's own flame graph view, rendered
// once and saved with its scripts and styles inline) and, for a live session, pprof's whole web UI
// served from this binary (github.com/google/pprof's driver, the code behind `go tool pprof
// -http`).
//
// The profiles must carry their symbols (as net/http/pprof and runtime/pprof write them); nothing
// here symbolizes, so nothing reaches for binaries or the network.
package profiling

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/google/pprof/driver"

	"github.com/loadproof/loadproof/internal/localhttp"
)

// pprof's driver keeps package state (its settings, the interactive mode); one session at a time.
var driverMu sync.Mutex

// flags hands the driver a fixed command line.
type flags struct {
	fs    *flag.FlagSet
	args  []string
	extra []string
}

func newFlags(args []string) *flags {
	fs := flag.NewFlagSet("pprof", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return &flags{fs: fs, args: args}
}

func (f *flags) Bool(o string, d bool, c string) *bool          { return f.fs.Bool(o, d, c) }
func (f *flags) Int(o string, d int, c string) *int             { return f.fs.Int(o, d, c) }
func (f *flags) Float64(o string, d float64, c string) *float64 { return f.fs.Float64(o, d, c) }
func (f *flags) String(o, d, c string) *string                  { return f.fs.String(o, d, c) }
func (f *flags) StringList(o, d, c string) *[]*string           { return &[]*string{f.fs.String(o, d, c)} }
func (f *flags) ExtraUsage() string                             { return strings.Join(f.extra, "\n") }
func (f *flags) AddExtraUsage(eu string)                        { f.extra = append(f.extra, eu) }
func (f *flags) Parse(usage func()) []string {
	if err := f.fs.Parse(f.args); err != nil {
		usage()
		return nil
	}
	if f.fs.NArg() == 0 {
		usage()
	}
	return f.fs.Args()
}

// ui sends the driver's messages to a writer and never asks for input or a browser.
type ui struct{ w io.Writer }

func (u ui) ReadLine(string) (string, error)     { return "", io.EOF }
func (u ui) Print(args ...any)                   { fmt.Fprintln(u.w, args...) }
func (u ui) PrintErr(args ...any)                { fmt.Fprintln(u.w, args...) }
func (u ui) IsTerminal() bool                    { return false }
func (u ui) WantBrowser() bool                   { return false }
func (u ui) SetAutoComplete(func(string) string) {}

func runDriver(profile string, hostport string, log io.Writer, server func(*driver.HTTPServerArgs) error) error {
	driverMu.Lock()
	defer driverMu.Unlock()
	if log == nil {
		log = io.Discard
	}
	args := []string{"-http=" + hostport, "-no_browser", "-symbolize=none", profile}
	return driver.PProf(&driver.Options{Flagset: newFlags(args), UI: ui{log}, HTTPServer: server})
}

// ErrNoPage reports that pprof rendered no flame graph for the profile.
var ErrNoPage = errors.New("flame: pprof rendered no flame graph")

// HTML renders the flame graph of the profile file at path as one self-contained page: pprof's
// flame graph view with its scripts, styles and data inline. The page's menus that need pprof's
// server (other views, refining) are noted as such on the page.
func HTML(path string) ([]byte, error) {
	var page []byte
	var status int
	err := runDriver(path, "127.0.0.1:0", nil, func(a *driver.HTTPServerArgs) error {
		h := a.Handlers["/flamegraph"]
		if h == nil {
			return ErrNoPage
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/flamegraph", nil))
		status, page = rec.Code, rec.Body.Bytes()
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("flame: %s: %w", path, err)
	}
	if status != http.StatusOK || len(page) == 0 {
		return nil, fmt.Errorf("%w for %s (HTTP %d: %s)", ErrNoPage, path, status, bytes.TrimSpace(page[:min(len(page), 200)]))
	}
	note := `<div style="font:13px sans-serif;background:#fff8e1;border-bottom:1px solid #e0c060;padding:4px 8px">` +
		`Flame graph of ` + html.EscapeString(path) + `, saved by loadproof from pprof's web UI. It works offline; ` +
		`the menus that switch views or refine need pprof's server: <code>--serve ADDR</code> on the profile command, or ` +
		`<code>go tool pprof -http=:8080 PROFILE</code>.</div>`
	if i := bytes.Index(page, []byte("<body>")); i >= 0 {
		page = append(page[:i+len("<body>")], append([]byte(note), page[i+len("<body>"):]...)...)
	}
	// The saved page runs offline: its inline script and styles, nothing fetched, posted or based
	// elsewhere (function names come from the profile, which came from a server).
	meta := []byte(`<meta http-equiv="Content-Security-Policy" content="` + FlameCSP + `">`)
	if i := bytes.Index(page, []byte("<head>")); i >= 0 {
		page = append(page[:i+len("<head>")], append(meta, page[i+len("<head>"):]...)...)
	} else {
		page = append(meta, page...)
	}
	return page, nil
}

// FlameCSP is the flame graph page's content security policy, the report page's static one
// (report.StaticCSP; TestFlameCSPIsTheReportsPolicy holds the two equal): inline script and style
// only, no connection, form submission or <base>.
const FlameCSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data: blob:; form-action 'none'; base-uri 'none'"

// LoopbackAddr makes an address without a host bind to loopback: ":8080" becomes
// "127.0.0.1:8080". A host given stays.
func LoopbackAddr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("flame: address %q: want HOST:PORT or :PORT: %w", addr, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// UICSP is the Content-Security-Policy pprof's web UI is served with. Its pages carry their
// scripts and styles inline (the templates embed common.js, stacks.js and the CSS), draw the call
// graph as inline SVG, and fetch their own origin only (saving and deleting a configuration);
// nothing is loaded from elsewhere.
const UICSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// ServeOptions say where and how to serve pprof's web UI.
type ServeOptions struct {
	// Addr is HOST:PORT or :PORT (loopback); port 0 picks a free one.
	Addr string
	// Profile is the profile file served.
	Profile string
	// Token, when set, must come with every request (?token= on the first load; localhttp's
	// guard then sets a cookie for the UI's own links).
	Token string
	// Log receives pprof's driver messages; nil discards them.
	Log io.Writer
	// Logger receives the warning about a non-loopback address; nil discards it.
	Logger *slog.Logger
	// Ready, when set, gets the UI's URL once it listens, with the token when there is one: for
	// the person running the tool only, never a result file.
	Ready func(url string)
}

// Serve serves pprof's web UI for the profile until ctx ends, behind localhttp's guard: a Host
// that does not name this server gets 421 (no DNS rebinding), a token is required when one is
// set, the security headers and UICSP are sent, and a UI bound to loopback answers loopback
// clients only, as pprof's own server does.
func Serve(ctx context.Context, o ServeOptions) error {
	addr, err := LoopbackAddr(o.Addr)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("flame: %w", err)
	}
	defer ln.Close()
	err = runDriver(o.Profile, ln.Addr().String(), o.Log, func(a *driver.HTTPServerArgs) error {
		ui := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h := a.Handlers[r.URL.Path]
			if h == nil {
				http.NotFound(w, r)
				return
			}
			h.ServeHTTP(w, r)
		})
		mux := http.NewServeMux()
		mux.Handle("/ui/", http.StripPrefix("/ui", ui))
		mux.Handle("/", http.RedirectHandler("/ui/", http.StatusTemporaryRedirect))
		guarded, err := localhttp.Guard(localhttp.Config{Name: "pprof UI", Bound: ln.Addr(), Token: o.Token, CSP: UICSP, Logger: o.Logger}, mux)
		if err != nil {
			return err
		}
		srv := &http.Server{Handler: guarded, ReadHeaderTimeout: 10 * time.Second}
		stop := context.AfterFunc(ctx, func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		})
		defer stop()
		if o.Ready != nil {
			o.Ready(localhttp.WithToken("http://"+ln.Addr().String()+"/ui/", o.Token))
		}
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("flame: serving %s: %w", o.Profile, err)
	}
	return nil
}
