package linkkeysserver

import "github.com/loadproof/loadproof/internal/linkkeys"

// Multi-process mode: how one configuration is divided among the children.

// Share returns the configuration child i of n runs so that n processes
// behind one SO_REUSEPORT port together enforce cfg: both limiters are split
// with admit.LimiterConfig.Share (global and overflow buckets split exactly,
// per-source limits approximately; see there), TCP_MAX_CONNECTIONS is split
// as whole connections summing exactly to the total (the kernel spreads
// connections evenly by 4-tuple hash, so the cap holds to within that
// spread), the handshake concurrency and TCP_MAX_INFLIGHT_FRAME_BYTES are
// split the same way (at least one slot, and one maximum-size frame, each).
// Timeouts, per-connection frame bounds, the body rate and the snapshot TTL
// are per connection or per process and are not divided.
func (cfg Config) Share(n, i int) Config {
	if n <= 1 {
		return cfg
	}
	cfg = cfg.WithDefaults()
	cfg.Handshake = cfg.Handshake.Share(n, i)
	cfg.PublicRead = cfg.PublicRead.Share(n, i)
	cfg.MaxConnections = splitCount(cfg.MaxConnections, n, i)
	cfg.HandshakeConcurrency = int(max(1, splitCount(uint64(cfg.HandshakeConcurrency), n, i)))
	cfg.MaxInflightFrameBytes = int64(max(linkkeys.MaxFrameSize, splitCount(uint64(cfg.MaxInflightFrameBytes), n, i)))
	return cfg
}

func splitCount(total uint64, n, i int) uint64 {
	base := total / uint64(n)
	if uint64(i) < total%uint64(n) {
		base++
	}
	return base
}
