package coord

import (
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/loadproof/loadproof/internal/boundedfile"
)

// Embedded is a NATS server (with JetStream) inside the coordinator's process, so a multi-worker
// run on one machine, or a cluster without NATS, needs nothing installed.
type Embedded struct {
	srv *server.Server
	dir string
	// URL is the client URL workers connect to.
	URL string
	// Token is the authorization token every client must present (the workers' token when the
	// server was started for a run, see EmbeddedConfig.Run).
	Token string
	// CoordToken is the coordinator's own token when the server was started for a run; it is never
	// handed out.
	CoordToken string
}

// EmbeddedConfig configures StartEmbedded. The zero value listens on 127.0.0.1 on a free port with
// a random token.
type EmbeddedConfig struct {
	// Listen is host:port; empty means 127.0.0.1:0 (a free port). A non-loopback host requires a
	// token (Token or a random one), which is always the case here: the server never runs open.
	Listen string
	// Token is the authorization token; empty generates a random one.
	Token string
	// NoJetStream runs the server without JetStream, so results travel in chunks (tests of that
	// path; a cluster whose NATS lacks JetStream).
	NoJetStream bool
	// Run and Prefix, when Run is set, give the server per-run users (NATS's own subject
	// permissions): the coordinator connects with its own token and may do anything; a client
	// with Token is a worker of that run and may publish only its subjects (join, snapshots,
	// chunks, results, pings, barrier, its result objects), subscribe only to what a worker
	// receives, and answer requests it received.
	Run, Prefix string
}

// runAuth is the embedded server's per-run authentication: two tokens, two users.
type runAuth struct {
	coord, worker string
	perms         *server.Permissions
}

// Check maps a client's token to the coordinator or the worker user.
func (a *runAuth) Check(c server.ClientAuthentication) bool {
	tok := []byte(c.GetOpts().Token)
	switch {
	case subtle.ConstantTimeCompare(tok, []byte(a.coord)) == 1:
		c.RegisterUser(&server.User{Username: "coordinator"})
	case subtle.ConstantTimeCompare(tok, []byte(a.worker)) == 1:
		c.RegisterUser(&server.User{Username: "worker", Permissions: a.perms})
	default:
		return false
	}
	return true
}

// workerPermissions are a run's worker rights on the embedded server.
func workerPermissions(prefix, run string) *server.Permissions {
	s := subjects{prefix, run}
	bucket := "OBJ_" + bucketName(run)
	return &server.Permissions{
		Publish: &server.SubjectPermission{Allow: []string{
			s.join(), s.sub("snap"), s.sub("chunk"), s.sub("result"), s.sub("cping"), s.sub("ready"),
			// The object store of the run, and only it.
			"$JS.API.INFO", "$JS.API.STREAM.INFO." + bucket, "$JS.API.STREAM.MSG.GET." + bucket, "$JS.API.DIRECT.GET." + bucket + ".>",
			"$JS.API.STREAM.PURGE." + bucket, "$O." + bucketName(run) + ".>",
		}},
		Subscribe: &server.SubjectPermission{Allow: []string{s.sub("w.>"), s.sub("abort"), s.sub("coord"), "_INBOX.>"}},
		Response:  &server.ResponsePermission{MaxMsgs: 1, Expires: time.Minute},
	}
}

// bucketName is the run's object store bucket.
func bucketName(run string) string { return "loadproof_" + run }

// StartEmbedded starts the embedded server and waits until it accepts connections.
func StartEmbedded(cfg EmbeddedConfig) (*Embedded, error) {
	host, port := "127.0.0.1", -1
	if cfg.Listen != "" {
		h, p, err := net.SplitHostPort(cfg.Listen)
		if err != nil {
			return nil, fmt.Errorf("coord: --listen %q: want host:port: %w", cfg.Listen, err)
		}
		if h != "" {
			host = h
		}
		if port, err = strconv.Atoi(p); err != nil || port < 0 || port > 65535 {
			return nil, fmt.Errorf("coord: --listen %q: port must be 0..65535", cfg.Listen)
		}
		if port == 0 {
			port = -1
		}
	}
	token := cfg.Token
	if token == "" {
		token = RandomSecret()
	}
	dir, err := os.MkdirTemp("", "loadproof-nats-*")
	if err != nil {
		return nil, fmt.Errorf("coord: embedded NATS store: %w", err)
	}
	opts := &server.Options{
		ServerName: "loadproof-coordinator",
		Host:       host,
		Port:       port,
		JetStream:  !cfg.NoJetStream,
		StoreDir:   dir,
		NoSigs:     true,
		NoLog:      true,
		MaxPayload: 8 << 20,
	}
	coordToken := ""
	if cfg.Run != "" {
		coordToken = RandomSecret()
		opts.CustomClientAuthentication = &runAuth{coord: coordToken, worker: token, perms: workerPermissions(cfg.Prefix, cfg.Run)}
	} else {
		opts.Authorization = token
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("coord: embedded NATS server: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		os.RemoveAll(dir)
		return nil, errors.New("coord: the embedded NATS server did not start within 10s")
	}
	return &Embedded{srv: srv, dir: dir, URL: srv.ClientURL(), Token: token, CoordToken: coordToken}, nil
}

// Close shuts the server down and removes its store.
func (e *Embedded) Close() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
	os.RemoveAll(e.dir)
}

// RandomSecret returns 32 random bytes in hex, for tokens and run secrets.
func RandomSecret() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ConnConfig says how to reach a NATS server or cluster.
type ConnConfig struct {
	// URL is one or more comma-separated server URLs.
	URL string
	// Name is the client name the server shows (worker or coordinator name).
	Name string
	// Token, CredsFile and NkeyFile are the three ways to authenticate (at most one is needed).
	Token     string
	CredsFile string
	NkeyFile  string
	// CAFile, CertFile and KeyFile configure TLS (a tls:// URL, or a server that requires it).
	CAFile, CertFile, KeyFile string
}

// Connect dials NATS with cfg. Reconnects are tried for a short while: a coordinator that stays
// away is noticed by the heartbeat watchdogs, not by the client library.
func Connect(cfg ConnConfig, extra ...nats.Option) (*nats.Conn, error) {
	opts := []nats.Option{
		nats.Name(cfg.Name),
		nats.MaxReconnects(10),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.Timeout(5 * time.Second),
	}
	if cfg.Token != "" {
		opts = append(opts, nats.Token(cfg.Token))
	}
	if cfg.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(cfg.CredsFile))
	}
	if cfg.NkeyFile != "" {
		o, err := nats.NkeyOptionFromSeed(cfg.NkeyFile)
		if err != nil {
			return nil, fmt.Errorf("coord: nkey seed %s: %w", cfg.NkeyFile, err)
		}
		opts = append(opts, o)
	}
	if cfg.CAFile != "" || cfg.CertFile != "" {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if cfg.CAFile != "" {
			pem, err := boundedfile.Read(cfg.CAFile, boundedfile.Cert)
			if err != nil {
				return nil, fmt.Errorf("coord: --nats-ca: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("coord: --nats-ca %s holds no PEM certificate", cfg.CAFile)
			}
			tc.RootCAs = pool
		}
		if cfg.CertFile != "" {
			cert, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("coord: --nats-cert/--nats-key: %w", err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		opts = append(opts, nats.Secure(tc))
	}
	opts = append(opts, extra...)
	nc, err := nats.Connect(cfg.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("coord: connecting to NATS at %s: %w", cfg.URL, err)
	}
	return nc, nil
}
