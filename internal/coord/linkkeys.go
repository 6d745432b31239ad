package coord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"strings"
	"time"

	"github.com/loadproof/loadproof/internal/engine"
	"github.com/loadproof/loadproof/internal/linkkeysload"
	"github.com/loadproof/loadproof/internal/linkkeysresult"
	"github.com/loadproof/loadproof/internal/result"
	"github.com/loadproof/loadproof/internal/textclip"
)

// LinkKeysRun spreads one LinkKeys client run over the coordinator's workers, as KeycastRun does a
// Keycast run: spec is the client's worker spec for its whole run (or its --segment), the JSON the
// hidden `linkkeys worker --spec` command reads, and every worker gets the same task, running
// segment i/N of it (the spec's segment split again, Segment.Sub) from the coordinated start
// instant. Their interval snapshots merge live: progress lines, and every merged interval to ctx's
// interval observer (engine.WithIntervalObserver), as an engine run on one machine would hand them.
// The connections hold barrier named in the spec is relayed to each worker. It returns each
// worker's result (linkkeysload.Result JSON) in worker order, nil for one that delivered none; a
// worker that failed or was lost makes it return an error with the others' results.
func (c *Coordinator) LinkKeysRun(ctx context.Context, spec string) ([][]byte, error) {
	var head struct {
		Command string `json:"command"`
		Barrier string `json:"barrier"`
	}
	if err := json.Unmarshal([]byte(spec), &head); err != nil {
		return nil, fmt.Errorf("coord: the LinkKeys worker spec is not JSON: %w", err)
	}
	kind := linkkeysresult.KindConnectHandshake
	if head.Command == linkkeysresult.CmdRequestBench {
		kind = linkkeysresult.KindRequest
	}
	describe := "linkkeys " + head.Command
	args := []string{"linkkeys", "worker", "--spec", spec}
	tr, err := c.RunTask(ctx, args, TaskOptions{Describe: describe, BarrierPath: head.Barrier,
		Observe: engine.IntervalObserver(ctx), ObserveWorker: engine.WorkerObserver(ctx), LatencyKind: kind})
	if err != nil {
		return nil, err
	}
	started := make([]time.Time, len(tr.Parts))
	for i, b := range tr.Parts {
		var env struct {
			StartedAt time.Time `json:"started_at"`
		}
		if b != nil && json.Unmarshal(b, &env) == nil {
			started[i] = env.StartedAt
		}
	}
	c.Record(tr, describe, args, started)
	var errs []error
	for i, e := range tr.Errors {
		if e != "" {
			errs = append(errs, fmt.Errorf("worker %d: %s", i, e))
		}
	}
	if tr.Lost != nil {
		errs = append(errs, tr.Lost)
	}
	return tr.Parts, errors.Join(errs...)
}

// linkKeysSpecArg returns the spec of a `linkkeys worker --spec JSON` task (CheckTaskFlags'
// form), or false for another task.
func linkKeysSpecArg(args []string) (string, bool) {
	if len(args) != 4 || args[0] != "linkkeys" || args[1] != "worker" || args[2] != "--spec" {
		return "", false
	}
	return args[3], true
}

// LinkKeysTargets returns everything a `linkkeys worker --spec JSON` task will reach, for the
// worker's host rules: the TCP address of its spec's one section ("tcp://host:port", AddrTarget)
// and its server_metrics location. A spec with more than one section is refused: the worker
// authorizes the section it runs, and only that one.
func LinkKeysTargets(args []string) ([]string, error) {
	raw, ok := linkKeysSpecArg(args)
	if !ok {
		return nil, fmt.Errorf("%q is not a `linkkeys worker --spec JSON` task", textclip.String(strings.Join(args, " "), 80))
	}
	var spec linkkeysload.WorkerSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		return nil, fmt.Errorf("the LinkKeys worker spec is not JSON: %w", err)
	}
	t, err := linkKeysSpecTarget(spec)
	if err != nil {
		return nil, err
	}
	out := []string{AddrTarget(t.Addr.String())}
	if spec.ServerMetrics != "" {
		out = append(out, spec.ServerMetrics)
	}
	return out, nil
}

// linkKeysSpecTarget is the target of a LinkKeys worker spec's one section; a spec with none, or
// with more than one, is refused.
func linkKeysSpecTarget(s linkkeysload.WorkerSpec) (*linkkeysload.Target, error) {
	var found []string
	var t *linkkeysload.Target
	for _, sec := range []struct {
		name string
		set  bool
		tgt  func() *linkkeysload.Target
	}{
		{"connections", s.Connections != nil, func() *linkkeysload.Target { return &s.Connections.Target }},
		{"ddos", s.DDoS != nil, func() *linkkeysload.Target { return &s.DDoS.Target }},
		{"handshake", s.Handshake != nil, func() *linkkeysload.Target { return &s.Handshake.Target }},
		{"requests", s.Requests != nil, func() *linkkeysload.Target { return &s.Requests.Target }},
		{"combined", s.Combined != nil, func() *linkkeysload.Target { return &s.Combined.Target }},
	} {
		if sec.set {
			found = append(found, sec.name)
			t = sec.tgt()
		}
	}
	switch {
	case len(found) == 0:
		return nil, errors.New("the LinkKeys worker spec names no target")
	case len(found) > 1:
		return nil, fmt.Errorf("the LinkKeys worker spec has %d sections (%s); a task runs exactly one", len(found), strings.Join(found, ", "))
	case !t.Addr.IsValid():
		return nil, fmt.Errorf("the LinkKeys worker spec's %s target has no address", found[0])
	}
	return t, nil
}

// SetLinkKeysSources prepares a `linkkeys worker --spec` task's source addresses on the worker.
// With this worker's own range (worker --client-ip-base/--client-ip-count; base empty: none) it
// rewrites the spec's section to take its sources from there: a combined spec's per-stream
// prefixes are the server's accounting keys, so it is refused rather than silently rewritten, and a
// ddos task, which numbers its sources across the whole run (one attempt each), has its segment's
// attempts moved to start at this worker's first address (a segment with more attempts than the
// worker has addresses is refused). Either way it then checks that this machine can bind the
// addresses its segment (the spec's, split by the task's seg as the client does) will use, so a
// missing address refuses the task with the command that adds it rather than failing attempt after
// attempt with EADDRNOTAVAIL: the coordinator cannot check other machines' addresses. Other tasks
// pass unchanged.
func SetLinkKeysSources(args []string, seg result.Segment, base string, count int) ([]string, error) {
	raw, ok := linkKeysSpecArg(args)
	if !ok {
		return args, nil
	}
	var spec linkkeysload.WorkerSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		return nil, fmt.Errorf("the LinkKeys worker spec is not JSON: %w", err)
	}
	run := spec.Segment
	if seg.Count > 0 {
		run = run.Sub(seg.Count, seg.Index)
	}
	stream := "the task's sources"
	if base != "" {
		b, err := linkkeysload.ParseIPv4("--client-ip-base", base)
		if err != nil {
			return nil, err
		}
		if count < 1 || int64(count) > math.MaxUint32 {
			return nil, fmt.Errorf("--client-ip-count %d: want 1 to %d", count, uint32(math.MaxUint32))
		}
		stream = "worker --client-ip-base"
		src := linkkeysload.SourceAddrs{Base: b, Count: uint32(count)}
		switch {
		case spec.Connections != nil:
			spec.Connections.Sources = src
		case spec.Handshake != nil:
			spec.Handshake.Sources = src
		case spec.Requests != nil:
			spec.Requests.Sources = src
		case spec.DDoS != nil:
			// One attempt per source: the count is the task's. The segment's attempts use source
			// indexes start…start+n-1 from Base (within Base's /8), so Base is set start addresses
			// before this worker's own first one.
			start, n := run.Range(int64(spec.DDoS.Sources))
			if n > int64(count) {
				return nil, fmt.Errorf("this worker's ddos segment makes %d attempts, one per source address, but --client-ip-count is %d: give it at least %d addresses of its own, or more workers", n, count, n)
			}
			spec.DDoS.Base = linkkeysload.IPv4((uint32(b)-uint32(start))&0x00FF_FFFF | uint32(b)&0xFF00_0000)
		case spec.Combined != nil:
			return nil, errors.New("a combined task keeps its per-stream source prefixes (the server accounts by them); run this worker without --client-ip-base")
		}
	}
	if target, r, ok := segmentSources(spec, run); ok {
		r.Stream = stream
		if _, err := linkkeysload.CheckSources(target, []linkkeysload.SourceUse{{Range: r}}, WorkerBind); err != nil {
			return nil, err
		}
	}
	if base == "" {
		return args, nil
	}
	out, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	return []string{args[0], args[1], args[2], string(out)}, nil
}

// segmentSources is the target and the source addresses segment run of spec uses; ok is false for
// a section without one range (combined: its streams are checked by the client) or no target.
func segmentSources(spec linkkeysload.WorkerSpec, run result.Segment) (target netip.AddrPort, r linkkeysload.SourceRange, ok bool) {
	var t linkkeysload.Target
	var part linkkeysload.SourceAddrs
	switch {
	case spec.Connections != nil:
		t, part = spec.Connections.Target, spec.Connections.Sources.In(run)
	case spec.Handshake != nil:
		t, part = spec.Handshake.Target, spec.Handshake.Sources.In(run)
	case spec.Requests != nil:
		t, part = spec.Requests.Target, spec.Requests.Sources.In(run)
	case spec.DDoS != nil:
		start, n := run.Range(int64(spec.DDoS.Sources))
		t, part = spec.DDoS.Target, linkkeysload.SourceAddrs{Base: linkkeysload.NthLoopbackAddr(spec.DDoS.Base, uint32(start)), Count: uint32(n)}
	default:
		return netip.AddrPort{}, r, false
	}
	if !t.Addr.IsValid() {
		return netip.AddrPort{}, r, false
	}
	return t.Addr, linkkeysload.SourceRange{First: part.Base, Count: part.Count}, true
}

// WorkerBind is how SetLinkKeysSources checks that this machine holds an address (nil: bind it;
// tests set it).
var WorkerBind func(linkkeysload.IPv4) error
