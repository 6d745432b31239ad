package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/loadproof/loadproof/internal/keycastserver"
)

// newKeycastServerCmd is `keycast-loadtest server` / `loadproof keycast server`: the Keycast
// reference server.
func newKeycastServerCmd(env *Env) *cobra.Command {
	var (
		addr, dataDir, pprofAddr string
		tlsOpts                  keycastserver.TLSOptions
	)
	c := &cobra.Command{
		Use:   "server",
		Short: "Run the Keycast reference server (accounts, OAuth with PKCE, UCAN tokens, signing RPC, metrics)",
		Long: "Runs a Keycast-compatible HTTP server that the setup, run and capacity commands (ours and\n" +
			"upstream's) work against. Configuration comes from the environment (DATABASE_URL, SERVER_NSEC,\n" +
			"MASTER_KEY_PATH, ALLOWED_ORIGINS, HANDLER_CACHE_SIZE, KEYCAST_CPU_SLOTS, KEYCAST_CPU_QUEUE,\n" +
			"KEYCAST_QUEUE_TIMEOUT_MS, KEYCAST_RPC_RATE_PER_SECOND, KEYCAST_RPC_BURST, KEYCAST_BCRYPT_COST,\n" +
			"TOKEN_EXPIRY_SECONDS, BUNKER_RELAYS, HTTP_BODY_LIMIT, KEYCAST_MAX_CONNECTIONS,\n" +
			"KEYCAST_MAX_CONNECTIONS_PER_SOURCE, KEYCAST_HEADER_TIMEOUT_MS, KEYCAST_BODY_TIMEOUT_MS, KEYCAST_MAX_TENANTS,\n" +
			"KEYCAST_FAST_PATH, PORT) and the flags below.\n" +
			"SIGINT or SIGTERM drains in-flight requests and stops.\n\n" +
			"With --tls-cert and --tls-key (PEM files) it serves https: TLS 1.2 or later, ALPN http/1.1, the\n" +
			"fast path and net/http alike. --tls-self-signed HOST[,HOST…] makes a certificate for those names\n" +
			"and addresses in memory instead; --tls-cert-out FILE writes it for the clients' --ca-cert.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := keycastserver.ConfigFromEnv(env.Getenv)
			if err != nil {
				return &ExitError{Code: ExitUsage, Err: err}
			}
			if cmd.Flags().Changed("addr") || cfg.Addr == "" {
				cfg.Addr = addr
			}
			cfg.DataDir = dataDir
			if err := tlsOpts.Validate(); err != nil {
				return usageError("server: %s", strings.TrimPrefix(err.Error(), "keycastserver: "))
			}
			return runKeycastServer(cmd.Context(), env, cfg, pprofAddr, tlsOpts)
		},
	}
	f := c.Flags()
	f.StringVar(&addr, "addr", keycastserver.DefaultAddr, "listen address (env PORT sets the port of the default)")
	f.StringVar(&dataDir, "data-dir", keycastserver.DefaultDataDir, "directory for the SQLite database, the server key and the master key")
	f.StringVar(&pprofAddr, "pprof-addr", "", "serve net/http/pprof on this address (off when empty), e.g. 127.0.0.1:6060")
	f.StringVar(&tlsOpts.CertFile, "tls-cert", "", "serve https with this PEM certificate (chain, leaf first); needs --tls-key")
	f.StringVar(&tlsOpts.KeyFile, "tls-key", "", "the PEM private key of --tls-cert")
	f.StringVar(&tlsOpts.SelfSigned, "tls-self-signed", "", "serve https with a self-signed certificate made at start for these comma-separated DNS names and IP addresses, e.g. 127.0.0.1,localhost")
	f.StringVar(&tlsOpts.CertOut, "tls-cert-out", "", "write the --tls-self-signed certificate (PEM) here, for the clients' --ca-cert")
	return c
}

func runKeycastServer(ctx context.Context, env *Env, cfg keycastserver.Config, pprofAddr string, tlsOpts keycastserver.TLSOptions) error {
	log := env.Logger
	tlsConf, warnings, err := tlsOpts.Load(time.Now())
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: err}
	}
	for _, w := range warnings {
		log.Warn("keycast server: " + w)
	}
	if tlsOpts.CertOut != "" {
		log.Info("wrote the self-signed certificate; give it to clients as --ca-cert", "path", tlsOpts.CertOut, "hosts", tlsOpts.SelfSigned)
	}
	srv, err := keycastserver.New(cfg, log)
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: err}
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		srv.Shutdown(context.Background())
		return &ExitError{Code: ExitCouldNotRun, Err: fmt.Errorf("keycast server: listening on %s: %w (pick another --addr or PORT)", cfg.Addr, err)}
	}
	var pprofSrv *http.Server
	if pprofAddr != "" {
		pln, err := net.Listen("tcp", pprofAddr)
		if err != nil {
			ln.Close()
			srv.Shutdown(context.Background())
			return &ExitError{Code: ExitCouldNotRun, Err: fmt.Errorf("keycast server: --pprof-addr %s: %w", pprofAddr, err)}
		}
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		pprofSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go pprofSrv.Serve(pln)
		log.Info("pprof listening", "addr", "http://"+pln.Addr().String()+"/debug/pprof/")
	}
	scheme := "http"
	if tlsConf != nil {
		scheme = "https"
	}
	fmt.Fprintf(env.Stdout, "keycast server listening on %s://%s (pid %d)\n", scheme, ln.Addr(), os.Getpid())

	errc := make(chan error, 1)
	go func() {
		if tlsConf != nil {
			errc <- srv.ServeTLS(ln, tlsConf)
			return
		}
		errc <- srv.Serve(ln)
	}()
	select {
	case err := <-errc:
		srv.Shutdown(context.Background())
		if pprofSrv != nil {
			pprofSrv.Close()
		}
		if errors.Is(err, keycastserver.ErrServerClosed) {
			return nil
		}
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("keycast server: %w", err)}
	case <-ctx.Done():
	}
	log.Info("shutting down: draining in-flight requests")
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	if pprofSrv != nil {
		pprofSrv.Close()
	}
	<-errc
	if err != nil {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("keycast server: shutdown: %w", err)}
	}
	log.Info("keycast server stopped")
	return nil
}
