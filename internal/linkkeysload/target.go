package linkkeysload

import (
	"encoding/json"
	"net"
	"strings"

	"github.com/loadproof/loadproof/internal/boundedfile"
	"github.com/loadproof/loadproof/internal/linkkeys"
)

// ServerHints are optional keys a server may add to its info file beyond the four the seed
// defines: where its METRICS can be read. Clients that know them use them for the server's
// accounting when --server-metrics is not given; others ignore them.
type ServerHints struct {
	// MetricsAddr is the host:port of the server's Prometheus endpoint (info key "metrics_addr").
	MetricsAddr string
	// MetricsLog is the path of a file holding the server's METRICS lines (info key "metrics_log").
	MetricsLog string
}

// LoadTarget reads an info file: the target (via linkkeys.ReadInfo, which requires the seed's four
// keys) and the optional hints.
func LoadTarget(path string) (Target, ServerHints, error) {
	info, err := linkkeys.ReadInfo(path)
	if err != nil {
		return Target{}, ServerHints{}, err
	}
	var h ServerHints
	if b, err := boundedfile.Read(path, boundedfile.Info); err == nil {
		var extra struct {
			MetricsAddr string `json:"metrics_addr"`
			MetricsLog  string `json:"metrics_log"`
		}
		if json.Unmarshal(b, &extra) == nil {
			h.MetricsAddr, h.MetricsLog = extra.MetricsAddr, extra.MetricsLog
		}
	}
	return TargetFromInfo(info), h, nil
}

// ResolveMetrics chooses where the server's counters are read: flag (a METRICS log path or an
// http(s) URL) when given, else the info file's metrics_addr (as http://addr/metrics), else its
// metrics_log; nil when none is known.
func ResolveMetrics(flag string, h ServerHints) *MetricsSource {
	switch {
	case flag != "":
		return &MetricsSource{Location: flag}
	case h.MetricsAddr != "":
		addr := h.MetricsAddr
		if host, port, err := net.SplitHostPort(addr); err == nil && (host == "" || host == "0.0.0.0" || host == "::") {
			addr = net.JoinHostPort("127.0.0.1", port)
		}
		if strings.HasPrefix(addr, "http://") || strings.HasPrefix(addr, "https://") {
			return &MetricsSource{Location: addr}
		}
		return &MetricsSource{Location: "http://" + addr + "/metrics"}
	case h.MetricsLog != "":
		return &MetricsSource{Location: h.MetricsLog}
	}
	return nil
}
