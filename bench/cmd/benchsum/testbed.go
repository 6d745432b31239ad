package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/loadproof/loadproof/internal/linkkeys"
	"github.com/loadproof/loadproof/internal/linkkeysresult"
)

func runTestbedBridge(e *env, args []string) error {
	out, rounds, err := outRounds(args, 2, 2)
	if err != nil {
		return err
	}
	// rate: a run's operations per second and client CPU µs per operation; a run with failures
	// is no figure of the path.
	rate := func(cmd, path string, r int) (float64, float64, error) {
		file := join(out, fmt.Sprintf("%s-%s-%d.json", cmd, path, r))
		d, err := openResult(file)
		if err != nil {
			return 0, 0, err
		}
		f, err := benchOf(filepath.Base(file), d, cmd == "handshake-bench")
		switch {
		case err != nil:
			return 0, 0, fmt.Errorf("%s %s round %d: %w", cmd, path, r, err)
		case f.bad != 0:
			return 0, 0, fmt.Errorf("%s %s round %d: %d %s", cmd, path, r, f.bad, f.badly)
		}
		return f.rate, cpuUsPerOp(d.ClientCPU, f.done), nil
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

// delta prints a counter of the server's accounting over a connections run: None when the run
// has none.
func delta(r *linkkeysresult.Result, counter func(linkkeysresult.Deltas) int64) string {
	if r.Server == nil {
		return "None"
	}
	return strconv.FormatInt(counter(r.Server.Delta), 10)
}

func accepted(d linkkeysresult.Deltas) int64   { return d.Accepted }
func handshakes(d linkkeysresult.Deltas) int64 { return d.HandshakesCompleted }
func shedLimit(d linkkeysresult.Deltas) int64  { return d.ShedConnectionLimit }

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
	var held int64
	var first *linkkeysresult.Result
	for _, h := range []int{2, 3} {
		name := fmt.Sprintf("held-h%d.json", h)
		d, err := openResult(join(out, name))
		if err != nil {
			return err
		}
		if d.Hold == nil {
			return fmt.Errorf("%s has no hold section (is it a connections result?)", name)
		}
		if first == nil {
			first = d
		}
		held += d.Hold.Held
		e.printf("host %d: held %d of %d, still open %d, ramp %s, client RSS %.1f KiB/conn; server delta over this client's run: accepted %s, handshakes %s\n",
			h, d.Hold.Held, per, d.Hold.StillOpen, linkkeysresult.FormatRustDuration(time.Duration(d.Hold.RampTime)), d.Hold.BytesPerConn/1024,
			delta(d, accepted), delta(d, handshakes))
	}
	e.printf("held at once across both load hosts: %d\n", held)
	e.printf("server over both hosts: accepted %s, handshakes completed %s, shed at the connection limit %s\n",
		delta(first, accepted), delta(first, handshakes), delta(first, shedLimit))
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
	ms, err := readMetricsLog(join(out, "server.log"))
	if err != nil {
		return err
	}
	var top *linkkeys.MetricsLine
	for i := range ms {
		if top == nil || ms[i].OpenConnections > top.OpenConnections {
			top = &ms[i]
		}
	}
	if top == nil { // as the summary always printed a log without METRICS lines
		e.printf("server RSS None bytes at its most open connections, None open: 0.0 KiB per open connection\n")
		return nil
	}
	var rss uint64
	if top.ProcessRSSBytes != nil {
		rss = *top.ProcessRSSBytes
	}
	e.printf("server RSS %s bytes at its most open connections, %d open: %.1f KiB per open connection\n",
		show(top.ProcessRSSBytes), top.OpenConnections, float64(rss)/max(float64(top.OpenConnections), 1)/1024)
	return nil
}
