package linkkeysload

import (
	"context"
	"strings"

	"github.com/loadproof/loadproof/internal/linkkeys"
	"github.com/loadproof/loadproof/internal/linkkeysresult"
)

// combinedAccounting reads the server after the run: the whole run's accounting (every stream's
// connection attempts against the server's totals), the per-prefix accounting of each stream when
// the server counts the stream's source range under its name (Attribution "source-prefix"), and
// the server's close counters (every source's) for the held population's survival.
func (r *Run) combinedAccounting(ctx context.Context, res *Result, before linkkeys.MetricsLine, beforeErr error) {
	res.Combined.Attribution = "none"
	r.readAccounting(ctx, res, before, beforeErr)
	acc := res.Server
	if acc == nil || len(acc.Checks) == 0 {
		return
	}
	b, a := acc.Before, acc.After
	for i := range res.Combined.Streams {
		s := &res.Combined.Streams[i]
		if ss := StreamAccounting(s, b, a); ss != nil {
			res.Combined.Attribution = "source-prefix"
			s.Server = ss
		}
		if s.Survival != nil {
			// Every source's, as the survival records them; the held range's own closed_*
			// counters are in s.Server.Delta.
			s.Survival.ServerCloses = closeDeltas(b, a)
		}
	}
}

// PrefixField is the name of a server's per-source-prefix counter: source_<prefix>_<counter>.
func PrefixField(prefix, counter string) string { return linkkeys.SourceFieldName(prefix, counter) }

// prefixDeltas returns the changes of the server's counters of the prefix called name (every
// counter of linkkeys.SourceCounters, and source_<name>_* fields of other names a server appends),
// or nil when the server reports none for name.
func prefixDeltas(before, after linkkeys.MetricsLine, name string) map[string]int64 {
	var d map[string]int64
	if c := after.Source(name); c != nil {
		var b linkkeys.SourceCounters
		if bc := before.Source(name); bc != nil {
			b = *bc
		}
		d = map[string]int64{}
		for _, f := range linkkeys.SourceFields() {
			d[f.Name] = int64(f.Value(c)) - int64(f.Value(&b))
		}
	}
	p := PrefixField(name, "")
	for k, v := range after.Extra {
		c, ok := strings.CutPrefix(k, p)
		if !ok {
			continue
		}
		if d == nil {
			d = map[string]int64{}
		}
		if _, known := d[c]; !known {
			d[c] = int64(v) - int64(before.Extra[k])
		}
	}
	return d
}

// closeDeltas returns the changes of the server's close counters: the closed_* fields of the
// METRICS line, and close_* or closed_* fields another server appends.
func closeDeltas(before, after linkkeys.MetricsLine) map[string]int64 {
	var d map[string]int64
	add := func(k string, a, b uint64) {
		if d == nil {
			d = map[string]int64{}
		}
		d[k] = int64(a) - int64(b)
	}
	for _, f := range linkkeys.MetricsFields() {
		if !strings.HasPrefix(f.Name, "closed_") {
			continue
		}
		av, aok := f.Value(&after)
		bv, _ := f.Value(&before)
		if aok {
			add(f.Name, av, bv)
		}
	}
	for k, v := range after.Extra {
		if strings.HasPrefix(k, "closed_") || strings.HasPrefix(k, "close_") {
			add(k, uint64(v), uint64(before.Extra[k]))
		}
	}
	return d
}

// StreamAccounting is a stream's own server accounting between two readings of a server that
// counts the stream's source range under the stream's name (see streamAccounting), or nil when
// the after reading has no such prefix.
func StreamAccounting(s *linkkeysresult.Stream, before, after linkkeys.MetricsLine) *linkkeysresult.StreamServer {
	d := prefixDeltas(before, after, s.Name)
	if d == nil {
		return nil
	}
	return streamAccounting(s, d)
}

// streamAccounting checks one stream's client counts against the server's counters of its prefix:
// attempts = accepted, attempts = admitted + shed, and (where the server counts them) successes =
// handshakes completed and failures = shed + handshake rejections + timeouts, as the whole run's
// accounting checks the server's totals.
func streamAccounting(s *linkkeysresult.Stream, d map[string]int64) *linkkeysresult.StreamServer {
	ss := &linkkeysresult.StreamServer{Prefix: s.Name, Delta: d}
	a := s.Result.Attempts
	if a == nil {
		a = newAttempts()
	}
	check := func(name string, client, server int64) {
		ss.Checks = append(ss.Checks, linkkeysresult.Check{Name: name, Client: client, Server: server, OK: client == server})
	}
	if v, ok := d["accepted"]; ok {
		check("attempts = server accepted", a.Attempted, v)
	}
	if v, ok := d["admitted"]; ok {
		check("attempts = server admitted + shed", a.Attempted, v+ss.Shed())
	}
	if v, ok := d["established"]; ok {
		check("established = server handshakes completed", a.Succeeded, v)
	}
	rej, rok := d["handshake_rejections"]
	tmo, tok := d["handshake_timeouts"]
	if rok && tok {
		check("failed = server shed + handshake rejections + timeouts", a.Failed, ss.Shed()+rej+tmo)
	}
	return ss
}
