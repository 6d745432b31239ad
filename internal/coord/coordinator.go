package coord

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/loadproof/loadproof/internal/syncio"
)

// CoordinatorConfig configures NewCoordinator. Zero values are documented defaults.
type CoordinatorConfig struct {
	// Conn says how to reach NATS; an empty URL starts an embedded server (Embedded).
	Conn     ConnConfig
	Embedded EmbeddedConfig
	// Prefix is the subject prefix; empty means DefaultPrefix.
	Prefix string
	// Secret signs and checks every message. Empty is refused on any NATS but the embedded one
	// unless InsecureUnsigned is set.
	Secret string
	// InsecureUnsigned allows an empty Secret on an external NATS: anyone who can publish there can
	// then forge control messages. It is logged loudly and recorded in the manifest.
	InsecureUnsigned bool
	// Workers is the number of workers (segments) the run needs (at least 1).
	Workers int
	// JoinTimeout bounds the wait for the workers; 0 means 2 minutes.
	JoinTimeout time.Duration
	// StartLead is how far ahead of the start message the start instant lies; 0 means 2 s.
	StartLead time.Duration
	// ResultWait bounds the wait for the workers' results after their load ended; 0 means 60 s.
	ResultWait time.Duration
	// Progress receives one line per merged interval; nil discards.
	Progress io.Writer
	// Logger receives the coordinator's log; nil discards.
	Logger *slog.Logger
}

// Coordinator runs the coordinator side of a distributed run.
type Coordinator struct {
	cfg    CoordinatorConfig
	log    *slog.Logger
	nc     *nats.Conn
	emb    *Embedded
	sig    *signer
	subj   subjects
	run    string
	bucket string
	obs    jetstream.ObjectStore

	mu      sync.Mutex
	workers []*WorkerInfo
	ready   chan struct{}
	cur     *taskState
	nextID  int
	lost    *WorkerLostError
	tasks   []TaskRecord
	chunks  map[string]*chunkSet
	// chunkBytes is the size of every chunk held, bounded by MaxResultBytes.
	chunkBytes int
	joinIDs    map[string]bool
	// taskRefusals are the tasks workers refused (TaskRefusals).
	taskRefusals []TaskRefusal
	partial      error
	stopHB       chan struct{}
	closeMu      sync.Once
}

// NewCoordinator connects (or embeds NATS), opens the run and starts accepting workers.
func NewCoordinator(ctx context.Context, cfg CoordinatorConfig) (*Coordinator, error) {
	if cfg.Workers < 1 {
		return nil, errors.New("coord: --workers must be at least 1")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if cfg.JoinTimeout <= 0 {
		cfg.JoinTimeout = 2 * time.Minute
	}
	if cfg.StartLead <= 0 {
		cfg.StartLead = 2 * time.Second
	}
	if cfg.ResultWait <= 0 {
		cfg.ResultWait = 60 * time.Second
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	// Lines come from the task's goroutine and from the NATS handlers: one write at a time.
	cfg.Progress = syncio.NewWriter(cfg.Progress)
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Secret == "" && cfg.Conn.URL != "" {
		if !cfg.InsecureUnsigned {
			return nil, errors.New("coord: no run secret on an external NATS: anyone who can publish there could forge tasks and results; " +
				"set LOADPROOF_SECRET or --secret-file (the same on every worker), or accept the risk with --insecure-unsigned")
		}
		log.Warn("INSECURE: control messages are not signed (--insecure-unsigned); anyone on this NATS can forge tasks, results and stops")
	}
	c := &Coordinator{cfg: cfg, log: log, sig: newSigner(cfg.Secret, "c"), workers: make([]*WorkerInfo, cfg.Workers),
		ready: make(chan struct{}), chunks: map[string]*chunkSet{}, joinIDs: map[string]bool{}, stopHB: make(chan struct{})}
	// The run identifier is random: it is the nonce every message of the run carries.
	c.run = RandomSecret()[:24]
	c.sig.bind(c.run, "c")
	c.subj = subjects{cfg.Prefix, c.run}
	if cfg.Conn.URL == "" {
		ecfg := cfg.Embedded
		ecfg.Run, ecfg.Prefix = c.run, cfg.Prefix
		emb, err := StartEmbedded(ecfg)
		if err != nil {
			return nil, err
		}
		c.emb = emb
		cfg.Conn.URL, cfg.Conn.Token = emb.URL, emb.CoordToken
		c.cfg.Conn = cfg.Conn
	}
	if cfg.Conn.Name == "" {
		cfg.Conn.Name = "loadproof-coordinator"
	}
	nc, err := Connect(cfg.Conn)
	if err != nil {
		c.closeEmbedded()
		return nil, err
	}
	c.nc = nc
	c.openBucket(ctx)
	// A worker's interval snapshots, result chunks and result go through one subscription, so one
	// goroutine handles them in the order the worker sent them. With a subscription each, nats.go
	// hands each subject to its own goroutine, and a result could be handled before the worker's
	// last snapshot (the live merge then closed that interval without it) or before its last chunk.
	ordered := map[string]nats.MsgHandler{
		c.subj.sub("snap"):   c.onSnap,
		c.subj.sub("chunk"):  c.onChunk,
		c.subj.sub("result"): c.onResult,
	}
	subs := []struct {
		subj string
		fn   nats.MsgHandler
	}{
		{c.subj.join(), c.onJoin},
		{c.subj.sub("*"), func(m *nats.Msg) {
			if h := ordered[m.Subject]; h != nil {
				h(m)
			}
		}},
		{c.subj.sub("cping"), c.onPing},
		{c.subj.sub("ready"), c.onReady},
	}
	for _, s := range subs {
		if _, err := nc.Subscribe(s.subj, s.fn); err != nil {
			c.Close()
			return nil, fmt.Errorf("coord: subscribing to %s: %w", s.subj, err)
		}
	}
	if err := nc.Flush(); err != nil {
		c.Close()
		return nil, fmt.Errorf("coord: %w", err)
	}
	go c.heartbeat()
	go c.monitor()
	return c, nil
}

// URL is the NATS URL workers connect to; Token the embedded server's token (empty otherwise).
func (c *Coordinator) URL() string { return c.cfg.Conn.URL }

// Token is the embedded server's token, or empty for an external server.
func (c *Coordinator) Token() string {
	if c.emb == nil {
		return ""
	}
	return c.emb.Token
}

// Run is the run's identifier (part of every subject).
func (c *Coordinator) Run() string { return c.run }

// Transport says how results travel: "object-store" or "chunks".
func (c *Coordinator) Transport() string {
	if c.bucket != "" {
		return "object-store"
	}
	return "chunks"
}

// openBucket makes the run's object store bucket when the server has JetStream.
func (c *Coordinator) openBucket(ctx context.Context) {
	js, err := jetstream.New(c.nc)
	if err != nil {
		return
	}
	bctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	name := bucketName(c.run)
	obs, err := js.CreateObjectStore(bctx, jetstream.ObjectStoreConfig{Bucket: name, Storage: jetstream.MemoryStorage, TTL: time.Hour})
	if err != nil {
		c.log.Info("no JetStream object store; results travel in chunks", "err", err)
		return
	}
	c.bucket, c.obs = name, obs
}

// Close says goodbye to the workers, then closes the connection and any embedded server.
func (c *Coordinator) Close() {
	c.closeMu.Do(func() {
		if c.nc != nil {
			var wg sync.WaitGroup
			for i := range c.cfg.Workers {
				c.mu.Lock()
				joined := c.workers[i] != nil
				c.mu.Unlock()
				if !joined {
					continue
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					if m, err := c.sig.msg(c.subj.worker(i, "bye"), Bye{}); err == nil {
						_, _ = c.nc.RequestMsg(m, 2*time.Second)
					}
				}()
			}
			wg.Wait()
			close(c.stopHB)
			c.deleteBucket()
			c.nc.Close()
		}
		c.closeEmbedded()
	})
}

// deleteBucket removes the run's object store, so a shared NATS keeps nothing of the run.
func (c *Coordinator) deleteBucket() {
	if c.bucket == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if js, err := jetstream.New(c.nc); err == nil {
		if err := js.DeleteObjectStore(ctx, c.bucket); err != nil {
			c.log.Warn("could not delete the run's object store", "bucket", c.bucket, "err", err)
		}
	}
}

func (c *Coordinator) closeEmbedded() {
	if c.emb != nil {
		c.emb.Close()
	}
}

// Count is the number of workers (segments) of the run.
func (c *Coordinator) Count() int { return c.cfg.Workers }

// Partial returns the first task of the session whose merged result lacks a worker's part, or
// nil: such a run must not exit 0.
func (c *Coordinator) Partial() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.partial
}

// Refusals counts the messages the coordinator refused, by reason (RefusedReplay, …): the
// coordination manifest records them.
func (c *Coordinator) Refusals() map[string]int64 { return c.sig.refusals() }
