package coord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/loadproof/loadproof/internal/engine"
	"github.com/loadproof/loadproof/internal/linkkeysload"
	"github.com/loadproof/loadproof/internal/linkkeysresult"
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
		Observe: engine.IntervalObserver(ctx), LatencyKind: kind})
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

// SetLinkKeysSources rewrites a `linkkeys worker --spec` task so its section takes its sources from
// this worker's own range (worker --client-ip-base/--client-ip-count). Other tasks pass unchanged;
// a combined spec's per-stream prefixes are the server's accounting keys, so it is refused rather
// than silently rewritten.
func SetLinkKeysSources(args []string, base string, count int) ([]string, error) {
	raw, ok := linkKeysSpecArg(args)
	if !ok {
		return args, nil
	}
	b, err := linkkeysload.ParseIPv4("--client-ip-base", base)
	if err != nil {
		return nil, err
	}
	if count < 1 || int64(count) > math.MaxUint32 {
		return nil, fmt.Errorf("--client-ip-count %d: want 1 to %d", count, uint32(math.MaxUint32))
	}
	var spec linkkeysload.WorkerSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		return nil, fmt.Errorf("the LinkKeys worker spec is not JSON: %w", err)
	}
	src := linkkeysload.SourceAddrs{Base: b, Count: uint32(count)}
	switch {
	case spec.Connections != nil:
		spec.Connections.Sources = src
	case spec.Handshake != nil:
		spec.Handshake.Sources = src
	case spec.Requests != nil:
		spec.Requests.Sources = src
	case spec.DDoS != nil:
		spec.DDoS.Base = b // one attempt per source: the count is the task's
	case spec.Combined != nil:
		return nil, errors.New("a combined task keeps its per-stream source prefixes (the server accounts by them); run this worker without --client-ip-base")
	}
	out, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	return []string{args[0], args[1], args[2], string(out)}, nil
}
