package linkkeysload

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/loadproof/loadproof/internal/linkkeys"
)

// TargetFromInfo returns the target an info file describes: its host (127.0.0.1 when it names
// none, like the seed's clients) and port.
func TargetFromInfo(info linkkeys.Info) Target {
	addr := netip.AddrFrom4([4]byte{127, 0, 0, 1})
	if a, err := netip.ParseAddr(info.Host); err == nil {
		addr = a.Unmap()
	}
	return Target{
		Addr:        netip.AddrPortFrom(addr, info.Port),
		Domain:      info.Domain,
		Fingerprint: info.Fingerprint,
		PID:         info.PID,
	}
}

// Dialer makes connection attempts: bind a source address (port chosen by the kernel at
// connect time), connect with TCP_NODELAY, and complete a TLS handshake that pins the target's
// fingerprint, all within one attempt timeout.
type Dialer struct {
	Target Target
	// Timeout bounds the whole attempt (connect plus handshake); 0 means 10 s.
	Timeout time.Duration
	// TLS is the client configuration; nil means linkkeys.ClientTLSConfig for the target.
	TLS *tls.Config

	// once guards building the default configuration: attempts dial concurrently.
	once       sync.Once
	defaultTLS *tls.Config
}

// tlsConfig returns the TLS configuration, building the pinned default once.
func (d *Dialer) tlsConfig() *tls.Config {
	if d.TLS != nil {
		return d.TLS
	}
	d.once.Do(func() { d.defaultTLS = linkkeys.ClientTLSConfig(d.Target.Domain, d.Target.Fingerprint) })
	return d.defaultTLS
}

// Dial makes one attempt from source address src. On success the connection's deadline is cleared.
// cfg, when non-nil, replaces the dialer's TLS configuration for this attempt (handshake-bench uses
// it for per-worker session caches).
func (d *Dialer) Dial(ctx context.Context, src IPv4, cfg *tls.Config) (*tls.Conn, Failure) {
	timeout := d.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	deadline := time.Now().Add(timeout)
	if cfg == nil {
		cfg = d.tlsConfig()
	}
	nd := net.Dialer{
		Deadline:       deadline,
		ControlContext: bindNoPort,
		KeepAlive:      -1, // the seed sets no SO_KEEPALIVE
	}
	// DialTCP takes the addresses as they are: no address string to format, parse and resolve per
	// attempt. Go sets TCP_NODELAY on every TCP connection it makes (the seed sets it explicitly;
	// TestDialSocketOptions checks it is on), so no second setsockopt here.
	tc, err := nd.DialTCP(ctx, "tcp4", netip.AddrPortFrom(src.Addr(), 0), d.Target.Addr)
	if err != nil {
		return nil, classify(StageConnect, err)
	}
	_ = tc.SetDeadline(deadline)
	conn := tls.Client(tc, cfg)
	// Ctrl-C interrupts a handshake in flight by expiring its deadline; AfterFunc starts no goroutine
	// unless ctx ends.
	stop := context.AfterFunc(ctx, func() { _ = tc.SetDeadline(time.Unix(1, 0)) })
	err = conn.Handshake()
	stop()
	if err != nil {
		_ = tc.Close()
		if ctx.Err() != nil {
			return nil, Failure{Stage: StageTLS, Detail: "canceled", Err: ctx.Err()}
		}
		return nil, classify(StageTLS, err)
	}
	_ = tc.SetDeadline(time.Time{})
	return conn, Failure{}
}

// closeConn ends an established connection the way the seed's clients do (TLS close_notify, then
// close) without waiting long on a peer that stopped reading.
func closeConn(c *tls.Conn) {
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	_ = c.Close()
}

// errorf builds a package error.
func errorf(format string, args ...any) error {
	return fmt.Errorf("linkkeysload: "+format, args...)
}
