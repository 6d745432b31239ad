package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// bridgeResult is what bench/testbed-bridge.sh reads of a handshake-bench or request-bench result.
type bridgeResult struct {
	ClientCPU  cpuNs `json:"client_cpu"`
	Handshakes *struct {
		PerSec    float64 `json:"handshakes_per_sec"`
		Completed float64 `json:"completed"`
		Failed    int64   `json:"failed"`
	} `json:"handshakes"`
	Requests *struct {
		PerSec    float64 `json:"requests_per_sec"`
		Completed float64 `json:"completed"`
		Errors    int64   `json:"errors"`
	} `json:"requests"`
}

func runTestbedBridge(e *env, args []string) error {
	if err := wantArgs(args, 2, 2); err != nil {
		return err
	}
	out := args[0]
	rounds, err := intArg("ROUNDS", args[1])
	if err != nil {
		return err
	}
	// rate: a run's operations per second and client CPU µs per operation; a run with failures
	// is no figure of the path.
	rate := func(cmd, path string, r int) (float64, float64, error) {
		var d bridgeResult
		if err := readJSON(join(out, fmt.Sprintf("%s-%s-%d.json", cmd, path, r)), &d); err != nil {
			return 0, 0, err
		}
		if cmd == "handshake-bench" {
			h := d.Handshakes
			if h == nil {
				return 0, 0, fmt.Errorf("%s %s round %d: no handshakes section", cmd, path, r)
			}
			if h.Failed != 0 {
				return 0, 0, fmt.Errorf("%s %s round %d: %d failed", cmd, path, r, h.Failed)
			}
			return h.PerSec, d.ClientCPU.Ns / max(h.Completed, 1) / 1e3, nil
		}
		q := d.Requests
		if q == nil {
			return 0, 0, fmt.Errorf("%s %s round %d: no requests section", cmd, path, r)
		}
		if q.Errors != 0 {
			return 0, 0, fmt.Errorf("%s %s round %d: %d errors", cmd, path, r, q.Errors)
		}
		return q.PerSec, d.ClientCPU.Ns / max(q.Completed, 1) / 1e3, nil
	}
	e.printf("%5s %-16s %11s %11s %11s %17s %7s\n", "round", "figure", "loopback/s", "bridge/s", "bridge/loop", "client µs/op loop", "bridge")
	for _, cmd := range []string{"handshake-bench", "request-bench"} {
		var ratios []float64
		for r := 1; r <= rounds; r++ {
			lo, lc, err := rate(cmd, "loop", r)
			if err != nil {
				return err
			}
			br, bc, err := rate(cmd, "bridge", r)
			if err != nil {
				return err
			}
			ratios = append(ratios, ratio(br, lo))
			e.printf("%5d %-16s %11.0f %11.0f %11s %17.1f %7.1f\n", r, cmd, lo, br, num("%.2f", ratio(br, lo)), lc, bc)
		}
		if len(ratios) > 0 {
			// The upper median, as this summary always gave.
			s := append([]float64(nil), ratios...)
			sortFloats(s)
			e.printf("%5s %-16s median ratio bridge/loopback %s\n", "", cmd, num("%.2f", s[len(s)/2]))
		}
	}
	return nil
}

// heldResult is what bench/testbed-held.sh reads of a connections result.
type heldResult struct {
	Hold struct {
		Held       float64               `json:"held"`
		StillOpen  json.RawMessage       `json:"still_open_at_end"`
		RampTime   struct{ Text string } `json:"ramp_time"`
		RSSPerConn float64               `json:"client_rss_bytes_per_connection"`
	} `json:"hold"`
	Server *struct {
		Delta map[string]json.RawMessage `json:"delta"`
	} `json:"server"`
}

func (h heldResult) delta(k string) string {
	if h.Server == nil {
		return "None"
	}
	return raw(h.Server.Delta[k])
}

// kernelCounters reads `cat /proc/net/netstat /proc/net/snmp` output: pairs of lines, names then
// values, keyed "TcpExt:ListenOverflows".
func kernelCounters(path string) (map[string]int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	v := map[string]int64{}
	for i := 0; i+1 < len(lines); i += 2 {
		names, vals := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(names) == 0 {
			continue
		}
		for j := 1; j < len(names) && j < len(vals); j++ {
			x, err := strconv.ParseInt(vals[j], 10, 64)
			if err != nil {
				x = 0
			}
			v[names[0]+names[j]] = x
		}
	}
	return v, nil
}

func runTestbedHeld(e *env, args []string) error {
	if err := wantArgs(args, 2, 2); err != nil {
		return err
	}
	out := args[0]
	per, err := intArg("PER_HOST", args[1])
	if err != nil {
		return err
	}
	var held float64
	var first heldResult
	for _, h := range []int{2, 3} {
		var d heldResult
		if err := readJSON(join(out, fmt.Sprintf("held-h%d.json", h)), &d); err != nil {
			return err
		}
		if h == 2 {
			first = d
		}
		held += d.Hold.Held
		e.printf("host %d: held %.0f of %d, still open %s, ramp %s, client RSS %.1f KiB/conn; server delta over this client's run: accepted %s, handshakes %s\n",
			h, d.Hold.Held, per, raw(d.Hold.StillOpen), d.Hold.RampTime.Text, d.Hold.RSSPerConn/1024,
			d.delta("accepted_connections"), d.delta("handshakes_completed"))
	}
	e.printf("held at once across both load hosts: %.0f\n", held)
	e.printf("server over both hosts: accepted %s, handshakes completed %s, shed at the connection limit %s\n",
		first.delta("accepted_connections"), first.delta("handshakes_completed"), first.delta("shed_connection_limit"))
	b, err := kernelCounters(join(out, "server-kernel-before.txt"))
	if err != nil {
		return err
	}
	a, err := kernelCounters(join(out, "server-kernel-after.txt"))
	if err != nil {
		return err
	}
	var parts []string
	for _, k := range []string{"TcpExt:ListenOverflows", "TcpExt:ListenDrops", "TcpExt:SyncookiesSent", "TcpExt:TCPTimeouts", "Tcp:RetransSegs"} {
		parts = append(parts, fmt.Sprintf("%s +%d", k, a[k]-b[k]))
	}
	e.printf("server host kernel: %s\n", strings.Join(parts, ", "))
	// The server's own view: its RSS at the METRICS line with the most open connections (the
	// first such line), per open connection.
	ms, err := metricsLines[map[string]json.RawMessage](join(out, "server.log"))
	if err != nil {
		return err
	}
	var top map[string]json.RawMessage
	var topOpen float64
	for _, m := range ms {
		if o, _ := optNumber(m["open_connections"]); top == nil || o > topOpen {
			top, topOpen = m, o
		}
	}
	rss, _ := optNumber(top["process_rss_bytes"])
	e.printf("server RSS %s bytes at its most open connections, %s open: %.1f KiB per open connection\n",
		raw(top["process_rss_bytes"]), raw(top["open_connections"]), rss/max(topOpen, 1)/1024)
	return nil
}
