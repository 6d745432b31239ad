package linkkeysload

import (
	"context"
	"crypto/tls"
	"time"

	"github.com/loadproof/loadproof/internal/engine"
)

// DDoSConfig is the seed's ddos command (docs/protocol-linkkeys.md, ddos): one connection attempt
// from each of Sources distinct addresses, base + i inside 127.0.0.0/8.
type DDoSConfig struct {
	Target         Target        `json:"target"`
	Sources        uint32        `json:"sources"`
	Concurrency    uint32        `json:"concurrency"`
	AttemptTimeout time.Duration `json:"attempt_timeout"`
	Base           IPv4          `json:"client_ip_base"`
	ProgressEvery  uint32        `json:"progress_every"`
}

// runDDoSSegment makes the segment's attempts: its Range of the source indexes, one attempt each (a
// count-bounded engine run), with its Share of the concurrency.
func runDDoSSegment(ctx context.Context, cfg DDoSConfig, seg engine.Segment, p Progress, sample *MetricsSource) (Result, error) {
	defer tuneGC(gcPercentChurn)()
	return prepareDDoS(cfg, seg, p, sample).execute(ctx)
}

// prepareDDoS is runDDoSSegment's workload.
func prepareDDoS(cfg DDoSConfig, seg engine.Segment, p Progress, sample *MetricsSource) workload {
	cpu0 := processCPU()
	start, count := seg.Range(int64(cfg.Sources))
	conc := max(seg.Share(int64(cfg.Concurrency)), 1)
	d := &attemptDriver{
		dialer:  &Dialer{Target: cfg.Target, Timeout: cfg.AttemptTimeout},
		source:  func(_ *engine.Worker, n int64) IPv4 { return NthLoopbackAddr(cfg.Base, uint32(start+n)) },
		success: func(_ *engine.Worker, c *tls.Conn, _ time.Duration) { closeConn(c) },
	}
	ec := attemptConfig(d, int(min(conc, max(count, 1))), count, p)
	ec.Sample = serverSampler(sample)
	return workload{cfg: ec, nothing: count == 0, finish: func(run *engine.Run) (Result, error) {
		res := segmentResult(CmdDDoS, cfg.Target, seg, run)
		res.Attempts = attemptsOf(&res)
		res.ClientCPU = Duration(processCPU() - cpu0)
		res.Finish()
		return res, nil
	}}
}

// DDoS runs the ddos command: header, attempts (in this process or fanned out), DONE lines, and the
// server's accounting next to the client's when its METRICS are reachable.
func DDoS(ctx context.Context, cfg DDoSConfig, r Run) (Result, error) {
	out := r.stdout()
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	WriteDDoSHeader(out, cfg)
	progress := r.attemptProgress("ddos", int64(cfg.Sources), cfg.ProgressEvery, "allowed", "denied")
	before, metricsErr := r.metricsBefore(ctx)
	if metricsErr == nil && r.Metrics != nil && r.OnServerBefore != nil {
		r.OnServerBefore(before)
	}
	meter := r.startCPU(cfg.Target)
	var res Result
	var err error
	if r.Workers <= 1 {
		res, err = runDDoSSegment(ctx, cfg, r.seg(), progress, r.Metrics)
	} else {
		res, err = r.fanOut(ctx, WorkerSpec{Command: CmdDDoS, DDoS: &cfg}, newAggregate(progress))
	}
	progress.Close()
	if err != nil {
		return Result{}, err
	}
	meter.stop(&res)
	r.stamp(&res)
	WriteDDoSDone(out, cfg, res)
	r.accounting(ctx, &res, before, metricsErr)
	WriteHeadline(out, res)
	return res, r.writeJSON(ctx, res)
}
