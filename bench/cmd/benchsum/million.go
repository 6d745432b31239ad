package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/loadproof/loadproof/internal/linkkeys"
	"github.com/loadproof/loadproof/internal/linkkeysresult"
)

// millionSample is one line of bench/linkkeys-million.sh's samples.jsonl: the server's and the
// clients' memory, the kernel's, and the server's last METRICS figures, at one plateau. The
// format is benchsum's own (million-sample writes it, million reads it), so its one model is here.
type millionSample struct {
	Label    string                     `json:"label"`
	Time     float64                    `json:"time"`
	Server   procTotals                 `json:"server"`
	Client   procTotals                 `json:"client"`
	Meminfo  map[string]float64         `json:"meminfo"`
	Sockstat map[string]float64         `json:"sockstat"`
	Slabs    map[string]slabCache       `json:"slabs"`
	Net      map[string]float64         `json:"net"`
	Metrics  map[string]json.RawMessage `json:"metrics"`
}

// procTotals is memory summed over a set of processes, in bytes.
type procTotals struct {
	Procs   int     `json:"procs"`
	VmRSS   float64 `json:"VmRSS"`
	RssAnon float64 `json:"RssAnon"`
	RssFile float64 `json:"RssFile"`
}

type slabCache struct {
	Objects float64 `json:"objects"`
	Size    float64 `json:"size"`
}

// metric is a METRICS figure of the sample (0 when absent or null).
func (s millionSample) metric(k string) float64 {
	f, _ := optNumber(s.Metrics[k])
	return f
}

// runMillionMachine prints the machine line of bench/linkkeys-million.sh: what bounds a million
// held connections (memory, open files, somaxconn, ports, TCP memory). Linux: it reads /proc, as
// the script's sampling does; elsewhere the fields read "?".
func runMillionMachine(e *env, args []string) error {
	if err := wantArgs(args, 0, 0); err != nil {
		return err
	}
	cpu := "?"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				_, v, _ := strings.Cut(l, ":")
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := readKeyed("/proc/meminfo")
	kernel := "?"
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = strings.TrimSpace(string(b))
	}
	nofile := "?"
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil {
		nofile = strconv.FormatUint(rl.Cur, 10)
	}
	sysctl := func(p string) []string {
		b, err := os.ReadFile("/proc/sys/" + strings.ReplaceAll(p, ".", "/"))
		if err != nil {
			return []string{"?"}
		}
		return strings.Fields(string(b))
	}
	e.printf("machine: %s, %d cores, %.1f GiB, kernel %s, nofile %s, fs.file-max %s, somaxconn %s, ports %s, tcp_mem %s\n",
		cpu, runtime.NumCPU(), mem["MemTotal"]/(1<<20), kernel, nofile, sysctl("fs.file-max")[0], sysctl("net.core.somaxconn")[0],
		strings.Join(sysctl("net.ipv4.ip_local_port_range"), "-"), strings.Join(sysctl("net.ipv4.tcp_mem"), "/"))
	return nil
}

// readKeyed reads a "Key: value ..." file (/proc/meminfo) into the first number of each line.
func readKeyed(path string) map[string]float64 {
	out := map[string]float64{}
	b, err := os.ReadFile(path)
	if err != nil {
		return out
	}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(l, ":")
		f := strings.Fields(v)
		if !ok || len(f) == 0 {
			continue
		}
		if x, err := strconv.ParseFloat(f[0], 64); err == nil {
			out[k] = x
		}
	}
	return out
}

// children lists a process's descendants. A Go process forks from any of its threads, and each
// thread lists only its own children.
func children(pid int) []int {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return nil
	}
	var kids []int
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, t.Name()))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if k, err := strconv.Atoi(f); err == nil {
				kids = append(kids, k)
			}
		}
	}
	all := append([]int(nil), kids...)
	for _, k := range kids {
		all = append(all, children(k)...)
	}
	return all
}

// procMemory sums VmRSS, RssAnon and RssFile over pids (those that still exist).
func procMemory(pids []int) procTotals {
	var t procTotals
	for _, p := range pids {
		s := readKeyed(fmt.Sprintf("/proc/%d/status", p))
		if len(s) == 0 {
			continue
		}
		t.Procs++
		t.VmRSS += s["VmRSS"] * 1024
		t.RssAnon += s["RssAnon"] * 1024
		t.RssFile += s["RssFile"] * 1024
	}
	return t
}

// clientPids are the processes running BINARY connections or BINARY worker.
func clientPids(binary string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, d := range ents {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := bytes.Split(b, []byte{0})
		if len(args) > 1 && string(args[0]) == binary && (string(args[1]) == "connections" || string(args[1]) == "worker") {
			out = append(out, pid)
		}
	}
	return out
}

// snmpCounters reads /proc/net/snmp or /proc/net/netstat (pairs of lines) as "Tcp.RetransSegs".
func snmpCounters(path string, into map[string]float64) {
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	for i := 0; i+1 < len(lines); i += 2 {
		h, v := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(h) == 0 {
			continue
		}
		p := strings.TrimSuffix(h[0], ":")
		for j := 1; j < len(h) && j < len(v); j++ {
			if x, err := strconv.ParseFloat(v[j], 64); err == nil {
				into[p+"."+h[j]] = x
			}
		}
	}
}

var millionSlabs = map[string]bool{"TCP": true, "sock_inode_cache": true, "filp": true, "dentry": true, "eventpoll_epi": true,
	"eventpoll_pwq": true, "skbuff_head_cache": true, "tcp_bind_bucket": true, "tcp_bind2_bucket": true}

var millionMetricKeys = []string{"established_connections", "open_connections", "accepted_connections", "established_total",
	"handshake_timeouts", "handshake_rejections", "shed_connection_limit", "shed_handshake_per_source", "shed_handshake_overflow",
	"shed_handshake_global", "frame_buffer_bytes", "process_rss_bytes"}

// runMillionSample prints one samples.jsonl line.
func runMillionSample(e *env, args []string) error {
	if err := wantArgs(args, 4, 4); err != nil {
		return err
	}
	label, out, binary := args[0], args[2], args[3]
	spid, err := intArg("SERVER_PID", args[1])
	if err != nil {
		return err
	}
	s := millionSample{Label: label, Time: float64(time.Now().UnixNano()) / 1e9,
		Server: procMemory(append([]int{spid}, children(spid)...)), Client: procMemory(clientPids(binary)),
		Meminfo: map[string]float64{}, Sockstat: map[string]float64{}, Slabs: map[string]slabCache{}, Net: map[string]float64{},
		Metrics: map[string]json.RawMessage{}}
	mem := readKeyed("/proc/meminfo")
	for _, k := range []string{"MemAvailable", "Slab", "SReclaimable", "SUnreclaim", "KernelStack", "PageTables", "AnonPages"} {
		s.Meminfo[k] = mem[k] * 1024
	}
	if b, err := os.ReadFile("/proc/net/sockstat"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			k, rest, _ := strings.Cut(l, ":")
			if k != "TCP" {
				continue
			}
			f := strings.Fields(rest)
			for i := 0; i+1 < len(f); i += 2 {
				if x, err := strconv.ParseFloat(f[i+1], 64); err == nil {
					s.Sockstat[f[i]] = x
				}
			}
		}
	}
	if b, err := os.ReadFile("/proc/slabinfo"); err == nil { // root only: left out without it
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			if len(f) > 3 && millionSlabs[f[0]] {
				o, _ := strconv.ParseFloat(f[2], 64)
				z, _ := strconv.ParseFloat(f[3], 64)
				s.Slabs[f[0]] = slabCache{o, z}
			}
		}
	}
	net := map[string]float64{}
	snmpCounters("/proc/net/snmp", net)
	snmpCounters("/proc/net/netstat", net)
	for _, k := range []string{"Tcp.RetransSegs", "Tcp.EstabResets", "TcpExt.TCPAbortOnTimeout", "TcpExt.ListenOverflows", "TcpExt.TCPSynRetrans"} {
		s.Net[k] = net[k]
	}
	var drops float64
	if b, err := os.ReadFile("/proc/net/softnet_stat"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) > 1 {
				x, _ := strconv.ParseUint(f[1], 16, 64)
				drops += float64(x)
			}
		}
	}
	s.Net["softnet_dropped"] = drops
	// The last METRICS line of the server's log so far (none before the server wrote one), its
	// figures as the line gives them: the model written back in the line's form, so a field the
	// line lacks stays null.
	var last map[string]json.RawMessage
	ms, err := readMetricsLog(join(out, "server.log"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if len(ms) > 0 {
		body := strings.TrimPrefix(linkkeys.FormatMetricsLine(ms[len(ms)-1]), linkkeys.MetricsPrefix)
		if err := json.Unmarshal([]byte(body), &last); err != nil {
			return fmt.Errorf("server.log: last METRICS line: %w", err)
		}
	}
	for _, k := range millionMetricKeys {
		v, ok := last[k]
		if !ok {
			v = json.RawMessage("null")
		}
		s.Metrics[k] = v
	}
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	e.printf("%s\n", b)
	return nil
}

// runMillion prints the staircase's summary from samples.jsonl, machine.txt and layer*.json.
func runMillion(e *env, args []string) error {
	if err := wantArgs(args, 1, 1); err != nil {
		return err
	}
	out := args[0]
	b, err := os.ReadFile(join(out, "samples.jsonl"))
	if err != nil {
		return err
	}
	var rows []millionSample
	for i, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var s millionSample
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			return fmt.Errorf("samples.jsonl:%d: %w", i+1, err)
		}
		rows = append(rows, s)
	}
	if len(rows) == 0 {
		return fmt.Errorf("samples.jsonl: no samples")
	}
	mt, err := os.ReadFile(join(out, "machine.txt"))
	if err != nil {
		return err
	}
	e.printf("%s\n", strings.TrimSpace(string(mt)))
	const kib = 1024.0
	type kern struct{ slab, sunreclaim, stack, pagetables, tcpmem float64 }
	kernOf := func(r millionSample) kern {
		m := r.Meminfo
		return kern{m["Slab"], m["SUnreclaim"], m["KernelStack"], m["PageTables"], r.Sockstat["mem"] * 4096}
	}
	base := rows[0]
	e.printf("%9s %9s %7s | %-27s | %-27s | %-33s | %6s %6s | %s\n", "held", "server", "avail", "server KiB/conn (anon file)", "client KiB/conn (anon file)",
		"kernel KiB/conn (slab unrecl tcp)", "+srv", "+cli", "server accounting")
	per := func(a, b, n float64) float64 { return (a - b) / kib / max(n, 1) }
	prev := base
	for _, r := range rows[1:] {
		if r.Label == "closed" {
			continue
		}
		est := r.metric("established_connections")
		held, err := strconv.Atoi(strings.TrimRight(r.Label, "+"))
		if err != nil {
			return fmt.Errorf("samples.jsonl: label %q is not a count", r.Label)
		}
		s, c, k, bk := r.Server, r.Client, kernOf(r), kernOf(base)
		ps, pc := prev.Server, prev.Client
		dn := est - prev.metric("established_connections")
		shed := 0.0
		for _, x := range []string{"shed_connection_limit", "shed_handshake_per_source", "shed_handshake_overflow", "shed_handshake_global"} {
			shed += r.metric(x)
		}
		e.printf("%9d %9.0f %5.1fG | %6.2f (%5.2f %5.2f)       | %6.2f (%5.2f %5.2f)       | %6.2f (%5.2f %5.2f %5.2f)        | %6.2f %6.2f | accepted %s, estab_total %s, timeouts %s, rejections %s, shed %.0f\n",
			held, est, r.Meminfo["MemAvailable"]/gib,
			per(s.VmRSS, base.Server.VmRSS, est), per(s.RssAnon, base.Server.RssAnon, est), per(s.RssFile, base.Server.RssFile, est),
			per(c.VmRSS, 0, est), per(c.RssAnon, 0, est), per(c.RssFile, 0, est),
			per(k.slab+k.stack+k.pagetables+k.tcpmem, bk.slab+bk.stack+bk.pagetables+bk.tcpmem, est),
			per(k.slab, bk.slab, est), per(k.sunreclaim, bk.sunreclaim, est), per(k.tcpmem, bk.tcpmem, est),
			per(s.VmRSS, ps.VmRSS, dn), per(c.VmRSS, pc.VmRSS, dn),
			raw(r.Metrics["accepted_connections"]), raw(r.Metrics["established_total"]), raw(r.Metrics["handshake_timeouts"]),
			raw(r.Metrics["handshake_rejections"]), shed)
		prev = r
	}
	e.printf("network counters since the start (loopback backlog drops, retransmissions, resets, aborts):\n")
	for _, r := range rows[1:] {
		keys := slices.Sorted(maps.Keys(r.Net))
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = fmt.Sprintf("%s %.0f", k, r.Net[k]-base.Net[k])
		}
		e.printf("   %-8s %s\n", r.Label, strings.Join(parts, ", "))
	}
	var top []millionSample
	for _, r := range rows {
		if r.Label != "0" && r.Label != "closed" {
			top = append(top, r)
		}
	}
	if len(top) > 0 {
		t := top[len(top)-1]
		e.printf("top plateau: %.0f established (server METRICS), sockets in use (TCP, both ends) %.0f, TCP buffer pages %.0f; slab objects per held connection:\n",
			t.metric("established_connections"), t.Sockstat["inuse"], t.Sockstat["mem"])
		est := max(t.metric("established_connections"), 1)
		names := slices.Sorted(maps.Keys(t.Slabs))
		parts := make([]string, len(names))
		for i, k := range names {
			v := t.Slabs[k]
			parts[i] = fmt.Sprintf("%s %.2f × %.0f B", k, (v.Objects-base.Slabs[k].Objects)/est, v.Size)
		}
		e.printf("   %s\n", strings.Join(parts, ", "))
	}
	layers, _ := filepath.Glob(join(out, "layer*.json"))
	sort.Strings(layers)
	var held, still float64
	for _, f := range layers {
		j, err := openResult(f)
		if err != nil {
			e.printf("%s: unreadable (%v)\n", filepath.Base(f), err)
			continue
		}
		var a linkkeysresult.Attempts
		if j.Attempts != nil {
			a = *j.Attempts
		}
		ramp, stillText := "None", "None"
		var h int64
		if j.Hold != nil {
			h = j.Hold.Held
			stillText = show(j.Hold.StillOpen)
			still += float64(j.Hold.StillOpen)
			ramp = linkkeysresult.FormatRustDuration(time.Duration(j.Hold.RampTime))
		}
		held += float64(h)
		reasons := "{}"
		if len(a.Reasons) > 0 {
			reasons = show(a.Reasons)
		}
		e.printf("%s: %d attempted, %d established, %d failed %s; ramp %s, held %d, still open at the end %s; client CPU per attempt %.0f µs\n",
			filepath.Base(f), a.Attempted, a.Succeeded, a.Failed, reasons, ramp, h, stillText, cpuUsPerOp(j.ClientCPU, a.Attempted))
	}
	// A handshake the client completed can still time out on the server (its 5 s handshake timeout
	// covers the wait for a handshake slot, and the server may not have read the client's Finished
	// in time on a saturated machine): the server closes it, and the client's socket leaves
	// ESTABLISHED. So the server's count is compared with the client sockets still established at
	// the end.
	srv, srvText := 0.0, "None"
	haveSrv := false
	if len(top) > 0 {
		srvText = raw(top[len(top)-1].Metrics["established_connections"])
		srv, haveSrv = optNumber(top[len(top)-1].Metrics["established_connections"])
	}
	verdict := "MISMATCH"
	if haveSrv && srv == still {
		verdict = "exact"
	}
	e.printf("clients: %.0f handshakes completed and held, %.0f of them still established (TCP state) at the end of the hold; server: %s established at the top plateau; accounting %s\n",
		held, still, srvText, verdict)
	return nil
}

// optNumber parses a number of a sample's METRICS figures that may be null (ok false).
func optNumber(v json.RawMessage) (float64, bool) {
	var f *float64
	if json.Unmarshal(v, &f) != nil || f == nil {
		return 0, false
	}
	return *f, true
}
