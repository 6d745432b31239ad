package capacity

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/loadproof/loadproof/internal/keycastresult"
	"github.com/loadproof/loadproof/internal/machine"
)

// SafeError is an error whose message is safe to put in evidence: written by loadproof from fixed text
// and values already in the plan (phase names, the users-file path, the target host). ScrubError keeps
// its message and goes on to its cause.
type SafeError struct {
	Msg string
	Err error
}

func (e *SafeError) Error() string {
	if e.Err == nil {
		return e.Msg
	}
	return e.Msg + ": " + e.Err.Error()
}

func (e *SafeError) Unwrap() error { return e.Err }

// withheld replaces an error chain in which nothing is known to be safe.
const withheld = "error details withheld from the evidence (they are in the log on stderr)"

// ScrubError rebuilds an error chain for the evidence from parts known to carry no secret: SafeError
// messages, HTTP status codes (errors with a StatusCode() int method), network operations with their
// address, DNS names, file operations with their path, operating-system error names, and context and
// I/O sentinels. Every other message is dropped, because a message may quote a server's response
// body, a request, or a token. The full error belongs in the log, not the bundle.
func ScrubError(err error) string {
	var parts []string
	seen := map[string]bool{}
	add := func(s string) {
		if s != "" && !seen[s] {
			seen[s] = true
			parts = append(parts, s)
		}
	}
	var walk func(error, int)
	walk = func(e error, depth int) {
		if e == nil || depth > 32 {
			return
		}
		switch {
		case e == context.Canceled:
			add("canceled")
		case e == context.DeadlineExceeded || e == os.ErrDeadlineExceeded:
			add("deadline exceeded")
		case e == io.EOF || e == io.ErrUnexpectedEOF:
			add("connection closed early (EOF)")
		case e == fs.ErrNotExist:
			add("does not exist")
		case e == fs.ErrPermission:
			add("permission denied")
		}
		switch t := e.(type) {
		case *SafeError:
			add(t.Msg)
		case interface{ StatusCode() int }:
			add("HTTP " + strconv.Itoa(t.StatusCode()))
		case *net.OpError:
			s := t.Op
			if t.Net != "" {
				s += " " + t.Net
			}
			if t.Addr != nil {
				s += " " + t.Addr.String()
			}
			add(s)
		case *net.DNSError:
			s := "lookup " + t.Name
			if t.IsNotFound {
				s += ": no such host"
			} else if t.IsTimeout {
				s += ": timeout"
			}
			add(s)
		case *url.Error:
			add(t.Op + " " + safeURL(t.URL))
		case *fs.PathError:
			add(t.Op + " " + t.Path)
		case syscall.Errno:
			add(t.Error())
		}
		if m, ok := e.(interface{ Unwrap() []error }); ok {
			for _, c := range m.Unwrap() {
				walk(c, depth+1)
			}
			return
		}
		walk(errors.Unwrap(e), depth+1)
	}
	walk(err, 0)
	if len(parts) == 0 {
		return withheld
	}
	return strings.Join(parts, ": ")
}

// safeURL keeps a URL's scheme, host and path.
func safeURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparseable URL)"
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}

// The patterns compile on first use: every process of a binary that links this package, a
// LinkKeys server child too, would otherwise hold them in its live heap from start-up.
var (
	safeKey        = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,80}$`) })
	prometheusName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]{0,199}$`) })
	secretishName  = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?i)(pass|secret|token|nsec|credential|private|dsn|database_url|_key$|_key_|auth)`)
	})
)

// scrubResults makes a phase's results safe for the bundle: failure-cause names that are not plain
// identifiers are counted under "other_unclassified" (a cause name must never be a server message),
// Prometheus series names are kept only when they are valid names, the stop metric is kept only when
// it is a plain identifier, and secret-looking machine settings are redacted.
func scrubResults(r *keycastresult.Results) {
	if r == nil {
		return
	}
	if env := r.Envelope; env != nil {
		env.Causes = scrubCauses(env.Causes)
		for i := range env.Intervals {
			iv := &env.Intervals[i]
			iv.Causes = scrubCauses(iv.Causes)
			for k := range iv.Server {
				if !prometheusName().MatchString(k) {
					delete(iv.Server, k)
				}
			}
		}
		for k, v := range env.Flags {
			if secretishName().MatchString(k) || hasURLCredentials(v) {
				env.Flags[k] = "(redacted)"
			}
		}
		for i := range env.Machines {
			env.Machines[i] = scrubMachine(env.Machines[i])
		}
	}
	r.ConnectFailureCauses = scrubCauses(r.ConnectFailureCauses)
	if sm := r.ServerMetrics; sm != nil && len(sm.SeriesDeltas) > 0 {
		for k := range sm.SeriesDeltas {
			if !prometheusName().MatchString(k) {
				delete(sm.SeriesDeltas, k)
			}
		}
	}
	if r.Stop != nil && !safeKey().MatchString(r.Stop.Metric) {
		r.Stop.Metric = "unnamed"
	}
}

// scrubMachine redacts settings whose name looks like a secret, and any value that carries URL
// credentials.
func scrubMachine(m machine.Record) machine.Record {
	if len(m.Settings) == 0 {
		return m
	}
	s := make(map[string]string, len(m.Settings))
	for k, v := range m.Settings {
		if secretishName().MatchString(k) || hasURLCredentials(v) {
			v = "(redacted)"
		}
		s[k] = v
	}
	m.Settings = s
	return m
}

func hasURLCredentials(v string) bool {
	i := strings.Index(v, "://")
	if i < 0 {
		return false
	}
	rest := v[i+3:]
	if j := strings.IndexAny(rest, "/?#"); j >= 0 {
		rest = rest[:j]
	}
	return strings.Contains(rest, "@")
}

// scrubCauses keeps cause names that are plain identifiers and counts the rest under
// "other_unclassified", so no server text can become a key.
func scrubCauses(in map[string]int64) map[string]int64 {
	if len(in) == 0 {
		return in
	}
	causes := make(map[string]int64, len(in))
	for k, v := range in {
		if !safeKey().MatchString(k) {
			k = "other_unclassified"
		}
		causes[k] += v
	}
	return causes
}
