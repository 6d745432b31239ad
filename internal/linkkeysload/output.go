package linkkeysload

import (
	"fmt"
	"io"

	"github.com/loadproof/loadproof/internal/linkkeysresult"
	"github.com/loadproof/loadproof/internal/report"
)

// The seed's lines are drawn by internal/report (so `loadproof report` redraws them from a result
// file byte for byte); these functions hand it each command's parameters.

func (c ConnectionsConfig) params() linkkeysresult.Params {
	return linkkeysresult.Params{Count: c.Count, Concurrency: c.Concurrency, HoldSecs: c.HoldSecs,
		ClientIPCount: c.Sources.Count, ClientIPBase: c.Sources.Base.String()}
}

func (c HandshakeConfig) params() linkkeysresult.Params {
	return linkkeysresult.Params{DurationSecs: c.DurationSecs, Concurrency: c.Concurrency, Resume: c.Resume,
		ClientIPCount: c.Sources.Count, ClientIPBase: c.Sources.Base.String()}
}

func (c RequestConfig) params() linkkeysresult.Params {
	return linkkeysresult.Params{Op: c.Op, Connections: c.Connections, DurationSecs: c.DurationSecs, Pipeline: c.Pipeline, Rate: c.Rate,
		ClientIPCount: c.Sources.Count, ClientIPBase: c.Sources.Base.String()}
}

func (c DDoSConfig) params() linkkeysresult.Params {
	return linkkeysresult.Params{Sources: c.Sources, Concurrency: c.Concurrency, ClientIPBase: c.Base.String()}
}

// WriteConnectionsHeader prints the connections header line.
func WriteConnectionsHeader(w io.Writer, cfg ConnectionsConfig) {
	report.LinkKeysHeader(w, CmdConnections, cfg.params())
}

// WriteConnectionsDone prints the DONE line, the failure reasons (seed classes, then our detailed
// reasons), the NOTE and our summary lines.
func WriteConnectionsDone(w io.Writer, cfg ConnectionsConfig, r Result) {
	report.LinkKeysDone(w, CmdConnections, cfg.params(), &r)
}

// WriteHandshakeHeader prints the handshake-bench header line.
func WriteHandshakeHeader(w io.Writer, cfg HandshakeConfig) {
	report.LinkKeysHeader(w, CmdHandshakeBench, cfg.params())
}

// WriteHandshakeDone prints the DONE line and our summary lines.
func WriteHandshakeDone(w io.Writer, cfg HandshakeConfig, r Result) {
	report.LinkKeysDone(w, CmdHandshakeBench, cfg.params(), &r)
}

// WriteRequestHeader prints the request-bench header line.
func WriteRequestHeader(w io.Writer, cfg RequestConfig) {
	report.LinkKeysHeader(w, CmdRequestBench, cfg.params())
}

// WriteRequestEstablished prints the line after the connections are set up.
func WriteRequestEstablished(w io.Writer, n int64) { report.LinkKeysEstablished(w, n) }

// WriteRequestDone prints the DONE line, the NOTE when there were errors, and our summary lines.
func WriteRequestDone(w io.Writer, cfg RequestConfig, r Result) {
	report.LinkKeysDone(w, CmdRequestBench, cfg.params(), &r)
}

// WriteDDoSHeader prints the ddos header line.
func WriteDDoSHeader(w io.Writer, cfg DDoSConfig) {
	report.LinkKeysHeader(w, CmdDDoS, cfg.params())
}

// WriteDDoSDone prints the DONE line, the paragraph, and our lines (denial reasons, latency, CPU).
func WriteDDoSDone(w io.Writer, cfg DDoSConfig, r Result) {
	report.LinkKeysDone(w, CmdDDoS, cfg.params(), &r)
}

// WriteAccounting prints the server's accounting next to the client's.
func WriteAccounting(w io.Writer, a *ServerAccounting) { report.LinkKeysAccounting(w, a) }

// WriteAccountingError prints why the server's accounting could not be read.
func WriteAccountingError(w io.Writer, a *ServerAccounting) { report.LinkKeysAccountingError(w, a) }

// WriteCombinedHeader prints the combined command's header line.
func WriteCombinedHeader(w io.Writer, cfg CombinedConfig) {
	var parts []string
	for _, r := range cfg.SourceRanges() {
		parts = append(parts, fmt.Sprintf("%s=%s+%d", r.Stream, r.First, r.Count))
	}
	report.LinkKeysCombinedHeader(w, parts)
}

// WriteCombinedDone prints every stream's DONE lines, the held population's survival and the
// server's accounting, whole-run and per stream.
// WriteHeadline prints our headline and the refusals by design with their remedies.
func WriteHeadline(w io.Writer, r Result) { report.LinkKeysHeadline(w, &r) }

func WriteCombinedDone(w io.Writer, r Result) { report.LinkKeysCombinedDone(w, &r) }
