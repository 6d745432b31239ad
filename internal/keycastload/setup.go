package keycastload

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/loadproof/loadproof/internal/keycast"
)

// setupRetries is how often setup sends a shed or rate-limited registration step again.
const setupRetries = 30

// Setup modes.
const (
	ModeHTTP = "http"
	ModeDB   = "db"
)

// Defaults of the setup flags (docs/protocol-keycast.md, setup).
const (
	DefaultSetupUsers       = 100
	DefaultSetupConcurrency = 50
	DefaultMasterKeyPath    = "./master.key"
	DefaultUsersFile        = "./loadtest-users.json"
)

// SetupConfig mirrors `setup`'s flags. Zero values mean the documented defaults.
type SetupConfig struct {
	// URL is the target base URL (DefaultURL when empty). It is also written into the users file.
	URL string
	// Users is how many users to create (DefaultSetupUsers when 0).
	Users int
	// Concurrency bounds registrations in flight in HTTP mode (DefaultSetupConcurrency when 0).
	Concurrency int
	// DatabaseURL is the server's store (SQLite path or postgres:// URL); it enables DB mode.
	DatabaseURL string
	// MasterKeyPath is the server's master key file, used in DB mode to seal the users' secret
	// keys as the server does (DefaultMasterKeyPath when empty). Upstream accepts and ignores it
	// (docs/protocol-keycast.md, Quirks); DB-mode users then cannot sign.
	MasterKeyPath string
	// Mode is "http", "db" or "" (choose by ChooseMode's rule).
	Mode string
	// Bar draws a progress bar (github.com/vbauerster/mpb/v8) on Progress, which should be a
	// terminal; otherwise progress is written as lines.
	Bar bool
	// Progress receives progress; nil discards it.
	Progress io.Writer
	// Logger receives log records; nil discards them.
	Logger *slog.Logger
	// HTTPTimeout bounds each HTTP call of the registration flow (60 s when 0, as upstream).
	HTTPTimeout time.Duration
	// Lifetime is the DB-mode token lifetime (24 h when 0, as upstream).
	Lifetime time.Duration
	// TLS says how an https target's certificate is verified (HTTP mode).
	TLS TLSOptions
}

// SetupResult is what setup produced.
type SetupResult struct {
	Mode      string
	File      *keycast.UsersFile
	Attempted int
	// Failures counts failed users by cause ("register: HTTP 409", "token: No access_token in
	// response", "register: network_econnrefused").
	Failures map[string]int
	Duration time.Duration
	// Interrupted is set when ctx ended before every user was attempted; File holds the users
	// created until then.
	Interrupted bool
}

// ChooseMode applies upstream's rule (docs/protocol-keycast.md, setup): an explicit mode wins;
// otherwise DB mode when the URL contains "localhost" or "127.0.0.1" and a database URL is given;
// else HTTP mode.
func ChooseMode(mode, url, databaseURL string) (string, error) {
	switch mode {
	case ModeHTTP, ModeDB:
		if mode == ModeDB && databaseURL == "" {
			return "", errors.New("keycastload: --mode db needs the server's database: pass --database-url or set DATABASE_URL")
		}
		return mode, nil
	case "":
	default:
		return "", fmt.Errorf("keycastload: unknown setup mode %q; want db or http", mode)
	}
	if (strings.Contains(url, "localhost") || strings.Contains(url, "127.0.0.1")) && databaseURL != "" {
		return ModeDB, nil
	}
	return ModeHTTP, nil
}

func (c SetupConfig) normalize() (SetupConfig, error) {
	if c.URL == "" {
		c.URL = DefaultURL
	}
	c.URL = strings.TrimRight(c.URL, "/")
	if c.Users == 0 {
		c.Users = DefaultSetupUsers
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultSetupConcurrency
	}
	if c.MasterKeyPath == "" {
		c.MasterKeyPath = DefaultMasterKeyPath
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.HTTPTimeout <= 0 {
		c.HTTPTimeout = registrationTimeout
	}
	if c.Lifetime <= 0 {
		c.Lifetime = 24 * time.Hour
	}
	mode, _ := ChooseMode(c.Mode, c.URL, c.DatabaseURL)
	err := c.Validate()
	c.Mode = mode
	return c, err
}

// Validate is the one check of a setup's settings (the cli's setup calls it before it does
// anything, Setup before it creates anyone): every problem at once, as a *UsageError. An empty URL
// stands for DefaultURL; Users and Concurrency below 1 are problems here (a command line gives the
// ones it means), while Setup reads 0 as their defaults.
func (c SetupConfig) Validate() error {
	var errs []error
	if c.Users < 1 || c.Concurrency < 1 {
		errs = append(errs, errors.New("--users and --concurrency must be at least 1"))
	}
	url := strings.TrimRight(cmp.Or(c.URL, DefaultURL), "/")
	if _, err := parseTarget(url); err != nil {
		errs = append(errs, err)
	}
	if err := c.TLS.Check(url); err != nil {
		errs = append(errs, err)
	}
	if _, err := ChooseMode(c.Mode, url, c.DatabaseURL); err != nil {
		errs = append(errs, err)
	}
	return usage(errs)
}

// Setup creates test users (docs/protocol-keycast.md, setup) and returns them; the caller writes
// the users file (keycast.WriteUsersFile). Users that fail are dropped and their failures counted by cause; when
// none succeeds, Setup fails with upstream's "Failed to create any users" and the causes.
func Setup(ctx context.Context, cfg SetupConfig) (*SetupResult, error) {
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	var res *SetupResult
	if cfg.Mode == ModeDB {
		res, err = setupDB(ctx, cfg)
	} else {
		res, err = setupHTTP(ctx, cfg)
	}
	if err != nil {
		return nil, err
	}
	res.Mode = cfg.Mode
	res.Duration = time.Since(start)
	res.File.URL = cfg.URL
	res.File.CreatedAt = keycast.FormatTimestamp(time.Now())
	if len(res.File.Users) == 0 {
		return res, fmt.Errorf("keycastload: %s (%d attempted)%s", keycast.MsgNoUsersCreated, res.Attempted, FormatFailures(res.Failures))
	}
	return res, nil
}

// FormatFailures renders failure causes as indented lines, most frequent first ("" when none).
func FormatFailures(f map[string]int) string {
	if len(f) == 0 {
		return ""
	}
	keys := sortedKeys(f)
	sort.SliceStable(keys, func(i, j int) bool { return f[keys[i]] > f[keys[j]] })
	var b strings.Builder
	b.WriteString("; failures by cause:")
	for _, k := range keys {
		fmt.Fprintf(&b, "\n  %6d  %s", f[k], k)
	}
	return b.String()
}

// progressSink reports setup progress as a bar or as lines every `every` users.
type progressSink struct {
	p     *mpb.Progress
	bar   *mpb.Bar
	w     io.Writer
	every int
	n     int
	done  atomic.Int64
	ok    atomic.Int64
	mu    sync.Mutex
}

func newProgress(ctx context.Context, cfg SetupConfig, label string, every int) *progressSink {
	ps := &progressSink{w: cfg.Progress, every: every, n: cfg.Users}
	if cfg.Bar {
		ps.p = mpb.NewWithContext(ctx, mpb.WithOutput(cfg.Progress), mpb.WithWidth(40))
		ps.bar = ps.p.AddBar(int64(cfg.Users),
			mpb.PrependDecorators(decor.Name(label+" "), decor.CountersNoUnit("%d / %d")),
			mpb.AppendDecorators(decor.Percentage(), decor.Name(" "), decor.Elapsed(decor.ET_STYLE_GO)))
	}
	return ps
}

// step records one attempted user.
func (ps *progressSink) step(ok bool) {
	if ok {
		ps.ok.Add(1)
	}
	d := ps.done.Add(1)
	if ps.bar != nil {
		ps.bar.Increment()
		return
	}
	if d%int64(ps.every) == 0 || d == int64(ps.n) {
		ps.mu.Lock()
		fmt.Fprintf(ps.w, "Progress: %d/%d users attempted, %d created, %d failed\n", d, ps.n, ps.ok.Load(), d-ps.ok.Load())
		ps.mu.Unlock()
	}
}

func (ps *progressSink) finish() {
	if ps.p != nil {
		if !ps.bar.Completed() {
			ps.bar.Abort(false)
		}
		ps.p.Wait()
	}
}

// setupHTTP registers users over the API (upstream's HTTP mode), at most Concurrency at once.
func setupHTTP(ctx context.Context, cfg SetupConfig) (*SetupResult, error) {
	tc, err := cfg.TLS.ClientConfig(cfg.URL)
	if err != nil {
		return nil, err
	}
	hc := newRegistrationClient(cfg.Concurrency*2, cfg.HTTPTimeout, tc)
	defer hc.CloseIdleConnections()
	// upstream: lt{unix_ts}-{i}; the run id adds 6 random characters, so two setups started in the
	// same second do not collide on (tenant, email).
	runID := newRunID(time.Now())
	users := make([]*keycast.TestUser, cfg.Users)
	failures := map[string]int{}
	var mu sync.Mutex
	var next atomic.Int64
	var warned atomic.Int32
	ps := newProgress(ctx, cfg, "registering", 100)
	var wg sync.WaitGroup
	for range min(cfg.Concurrency, cfg.Users) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= cfg.Users {
					return
				}
				email := fmt.Sprintf("lt%s-%d@test.local", runID, i)
				u, err := RegisterUser(ctx, hc, cfg.URL, email, randomAlphanumeric(32), setupRetries)
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					cause := err.Error()
					var se *StepError
					if errors.As(err, &se) {
						cause = se.Cause()
					}
					mu.Lock()
					failures[cause]++
					mu.Unlock()
					if warned.Add(1) <= 5 {
						cfg.Logger.Warn("Failed to create user", "index", i, "err", err)
					}
					ps.step(false)
					continue
				}
				users[i] = &keycast.TestUser{Pubkey: u.Pubkey, Email: email, UcanToken: u.AccessToken}
				ps.step(true)
			}
		}()
	}
	wg.Wait()
	ps.finish()
	res := &SetupResult{File: &keycast.UsersFile{Users: []keycast.TestUser{}}, Failures: failures, Attempted: int(min(next.Load(), int64(cfg.Users)))}
	for _, u := range users {
		if u != nil {
			res.File.Users = append(res.File.Users, *u)
		}
	}
	res.Interrupted = ctx.Err() != nil
	if res.Interrupted {
		res.Attempted = len(res.File.Users) + sumFailures(failures)
	}
	fmt.Fprintf(cfg.Progress, "Created %d of %d users over HTTP (%d failed)\n", len(res.File.Users), cfg.Users, sumFailures(failures))
	return res, nil
}

func sumFailures(f map[string]int) int {
	n := 0
	for _, v := range f {
		n += v
	}
	return n
}
