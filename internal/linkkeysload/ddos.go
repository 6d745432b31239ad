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

func runDDoSSegment(ctx context.Context, cfg DDoSConfig, seg engine.Segment, p Progress) (Result, error) {
	defer tuneGC(gcPercentChurn)()
	cpu0 := processCPU()
	start, count := seg.Range(int64(cfg.Sources))
	conc := max(seg.Share(int64(cfg.Concurrency)), 1)
	t := newTally(p)
	pool := attemptPool{
		dialer: &Dialer{Target: cfg.Target, Timeout: cfg.AttemptTimeout},
		start:  start, count: count, concurrency: int(conc),
		source:    func(i int64) IPv4 { return NthLoopbackAddr(cfg.Base, uint32(i)) },
		onSuccess: func(c *tls.Conn) { closeConn(c) },
		tally:     t,
	}
	began := time.Now()
	pool.run(ctx)
	res := Result{Command: CmdDDoS, Target: cfg.Target, Start: began, End: time.Now(), Segments: []engine.Segment{seg}, Attempts: t.a,
		ClientCPU: Duration(processCPU() - cpu0)}
	res.finish()
	return res, nil
}

// DDoS runs the ddos command: header, attempts (in this process or fanned out), DONE lines, and the
// server's accounting next to the client's when its METRICS are reachable.
func DDoS(ctx context.Context, cfg DDoSConfig, r Run) (Result, error) {
	out := r.stdout()
	WriteDDoSHeader(out, cfg)
	var progress Progress = &SeedProgress{W: out, Every: int64(max(cfg.ProgressEvery, 1)), OKName: "allowed", NoName: "denied"}
	if r.Bar {
		progress = NewBarProgress(out, "ddos", int64(cfg.Sources), "allowed", "denied")
	}
	before, metricsErr := r.metricsBefore(ctx)
	meter := r.startCPU(cfg.Target)
	var res Result
	var err error
	if r.Workers <= 1 {
		res, err = runDDoSSegment(ctx, cfg, r.seg(), progress)
	} else {
		res, err = r.fanOut(ctx, WorkerSpec{Command: CmdDDoS, DDoS: &cfg}, newAggregate(progress))
	}
	progress.Close()
	if err != nil {
		return Result{}, err
	}
	meter.stop(&res)
	r.stamp(&res, cfg.Target)
	WriteDDoSDone(out, cfg, res)
	r.accounting(ctx, &res, before, metricsErr)
	return res, r.writeJSON(res)
}
