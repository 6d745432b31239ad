package keycastserver

import (
	"bytes"
	"net/http"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/loadproof/loadproof/internal/keycast"
)

// Labels of keycast_http_rpc_operation_duration_seconds. method is one of the RPC names or
// "unknown"; outcome is one of the outcome names.
var (
	rpcMethodLabels = []string{
		keycast.RPCGetPublicKey, keycast.RPCSignEvent, keycast.RPCNIP44Encrypt, keycast.RPCNIP44Decrypt,
		keycast.RPCNIP04Encrypt, keycast.RPCNIP04Decrypt, "unknown",
	}
	rpcOutcomeLabels = []string{
		"success", "auth_error", "client_error", "server_error", "admission_rejected", "rate_limited", "timeout", "unavailable",
	}
)

const (
	mGetPublicKey = iota
	mSignEvent
	mNIP44Encrypt
	mNIP44Decrypt
	mNIP04Encrypt
	mNIP04Decrypt
	mUnknown
)

const (
	oSuccess = iota
	oAuthError
	oClientError
	oServerError
	oAdmissionRejected
	oRateLimited
	oTimeout
	oUnavailable
)

// metrics holds the server's counters. The 19 Keycast series are plain atomics written in
// Keycast's order by hand; the histograms and admission series live in a client_golang
// registry appended after them.
type metrics struct {
	registrations, logins, loginFailures atomic.Uint64
	oauthCreated, oauthRevoked           atomic.Uint64
	rpcRequests, rpcHits, rpcMisses      atomic.Uint64
	rpcSuccess, rpcAuthErrors            atomic.Uint64
	cacheSize                            func() int
	registry                             *prometheus.Registry
	opDuration                           [7][8]prometheus.Observer
	rejections                           *prometheus.CounterVec
	rejectQueueFull, rejectQueueTimeout  prometheus.Counter
	rateLimited                          prometheus.Counter
	cpuInUse, cpuWaiting, cpuSlots       func() int
	handlerLoads, handlerLoadFailures    prometheus.Counter
	revokedEvictions                     prometheus.Counter
	openConns                            func() int
	connsShedLimit, connsShedFD          prometheus.Counter
	connsShedSource                      prometheus.Counter
	connsEvicted                         map[string]prometheus.Counter // by evictReasons
	tls                                  tlsMetrics                    // tls.go
}

func newMetrics(cacheSize, cpuInUse, cpuWaiting, cpuSlots, openConns func() int) *metrics {
	m := &metrics{cacheSize: cacheSize, cpuInUse: cpuInUse, cpuWaiting: cpuWaiting, cpuSlots: cpuSlots, openConns: openConns}
	reg := prometheus.NewRegistry()
	hist := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "keycast_http_rpc_operation_duration_seconds",
		Help:    "Time to answer one /api/nostr request, by RPC method and outcome",
		Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
	}, []string{"method", "outcome"})
	for i, meth := range rpcMethodLabels {
		for j, out := range rpcOutcomeLabels {
			m.opDuration[i][j] = hist.WithLabelValues(meth, out)
		}
	}
	m.rejections = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "keycast_expensive_resource_rejections_total",
		Help: "Requests shed with HTTP 503 admission_rejected because CPU-heavy work was saturated, by reason",
	}, []string{"resource", "outcome"})
	m.rejectQueueFull = m.rejections.WithLabelValues("cpu", "queue_full")
	m.rejectQueueTimeout = m.rejections.WithLabelValues("cpu", "queue_timeout")
	m.rateLimited = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "keycast_http_rpc_rate_limited_total",
		Help: "/api/nostr requests refused with HTTP 429 rate_limited by the per-authorization limit",
	})
	active := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "keycast_expensive_resource_active",
		Help:        "CPU-heavy operations running now",
		ConstLabels: prometheus.Labels{"resource": "cpu"},
	}, func() float64 { return float64(m.cpuInUse()) })
	waiting := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "keycast_expensive_resource_waiting",
		Help:        "Requests waiting for a CPU slot now",
		ConstLabels: prometheus.Labels{"resource": "cpu"},
	}, func() float64 { return float64(m.cpuWaiting()) })
	slots := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "keycast_expensive_resource_slots",
		Help:        "CPU slots configured (KEYCAST_CPU_SLOTS)",
		ConstLabels: prometheus.Labels{"resource": "cpu"},
	}, func() float64 { return float64(m.cpuSlots()) })
	m.handlerLoads = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "keycast_http_rpc_handler_loads_total",
		Help: "Handler cache misses that loaded an authorization from the database",
	})
	m.handlerLoadFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "keycast_http_rpc_handler_load_failures_total",
		Help: "Handler loads that failed (unknown, revoked or invalid authorization, or a database error)",
	})
	m.revokedEvictions = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "keycast_http_rpc_cache_revocation_evictions_total",
		Help: "Cached handlers evicted because their authorization was revoked",
	})
	conns := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "keycast_http_connections_open",
		Help: "Client connections open now (KEYCAST_MAX_CONNECTIONS caps them)",
	}, func() float64 { return float64(m.openConns()) })
	shed := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "keycast_http_connections_shed_total",
		Help: "Connections answered 503 admission_rejected and closed at accept: at KEYCAST_MAX_CONNECTIONS with every connection being served (limit), " +
			"over KEYCAST_MAX_CONNECTIONS_PER_SOURCE (per_source_limit), or out of file descriptors (fd_exhausted)",
	}, []string{"reason"})
	m.connsShedLimit = shed.WithLabelValues("limit")
	m.connsShedSource = shed.WithLabelValues("per_source_limit")
	m.connsShedFD = shed.WithLabelValues("fd_exhausted")
	evicted := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "keycast_http_connections_evicted_total",
		Help: "Connections closed at KEYCAST_MAX_CONNECTIONS to make room for a new one, the one that made no progress the longest, " +
			"by what it was waiting for: the rest of a request head (stalled_head), a request body (stalled_body) or the next request (idle)",
	}, []string{"reason"})
	m.connsEvicted = make(map[string]prometheus.Counter, len(evictReasons))
	for _, r := range evictReasons {
		m.connsEvicted[r] = evicted.WithLabelValues(r)
	}
	reg.MustRegister(hist, m.rejections, m.rateLimited, active, waiting, slots, m.handlerLoads, m.handlerLoadFailures, m.revokedEvictions,
		conns, shed, evicted)
	m.tls.register(reg)
	m.registry = reg
	return m
}

// value returns the current value of one of Keycast's 19 series.
func (m *metrics) value(name string) uint64 {
	switch name {
	case keycast.MetricHTTPRPCRequests:
		return m.rpcRequests.Load()
	case keycast.MetricHTTPRPCCacheHits:
		return m.rpcHits.Load()
	case keycast.MetricHTTPRPCCacheMisses:
		return m.rpcMisses.Load()
	case keycast.MetricHTTPRPCCacheSize:
		return uint64(m.cacheSize())
	case keycast.MetricHTTPRPCSuccess:
		return m.rpcSuccess.Load()
	case keycast.MetricHTTPRPCAuthErrors:
		return m.rpcAuthErrors.Load()
	case "keycast_registrations_total":
		return m.registrations.Load()
	case "keycast_logins_total":
		return m.logins.Load()
	case "keycast_login_failures_total":
		return m.loginFailures.Load()
	case "keycast_oauth_authorizations_created_total":
		return m.oauthCreated.Load()
	case "keycast_oauth_authorizations_revoked_total":
		return m.oauthRevoked.Load()
	}
	// The NIP-46 signer series: this server has no relay signer, so they stay 0.
	return 0
}

// appendText writes the exposition: Keycast's 19 series in their order, a blank line, then the
// registry's families (histograms, admission) in text format 0.0.4.
func (m *metrics) appendText(dst []byte) ([]byte, error) {
	dst = keycast.AppendMetricsText(dst, m.value)
	fams, err := m.registry.Gather()
	if err != nil {
		return dst, err
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range fams {
		buf.WriteByte('\n')
		if err := enc.Encode(f); err != nil {
			return dst, err
		}
	}
	return append(dst, buf.Bytes()...), nil
}

func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	body, err := s.m.appendText(make([]byte, 0, 16<<10))
	if err != nil {
		s.log.Error("keycastserver: gathering metrics failed", "err", err)
	}
	h := w.Header()
	h.Set("Content-Type", keycast.MetricsContentType)
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(body)
	}
}
