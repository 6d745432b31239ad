package main

import (
	"fmt"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

var (
	benchLine = regexp.MustCompile(`^Benchmark(\S+?)(-\d+)?\s+\d+\s+([\d.]+) ns/op`)
	benchCPU  = regexp.MustCompile(`([\d.]+) cpu-ns/op`)
	gcLine    = regexp.MustCompile(`gc \d+ @[\d.]+s \d+%: [\d.+]+ ms clock, ([\d.]+)\+([\d.]+)/([\d.]+)/([\d.]+)\+([\d.]+) ms cpu, \d+->\d+->(\d+) MB`)
)

// cryptoBench is the per-operation benchmarks of one crypto-*.txt: CPU ns per operation where the
// benchmark reports it (cpu-ns/op, comparable with the runs' CPU figures), else wall ns, and the
// wall ns apart.
type cryptoBench struct{ cpu, wall map[string]float64 }

func readCryptoBench(path string) (cryptoBench, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return cryptoBench{}, err
	}
	c := cryptoBench{map[string]float64{}, map[string]float64{}}
	for _, l := range strings.Split(string(b), "\n") {
		m := benchLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		wall, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			return c, fmt.Errorf("%s: %q: %w", path, l, err)
		}
		cpu := wall
		if cm := benchCPU.FindStringSubmatch(l); cm != nil {
			if cpu, err = strconv.ParseFloat(cm[1], 64); err != nil {
				return c, fmt.Errorf("%s: %q: %w", path, l, err)
			}
		}
		c.cpu[m[1]], c.wall[m[1]] = cpu, wall
	}
	return c, nil
}

// gcTotals is what GODEBUG=gctrace=1 said over one server run.
type gcTotals struct {
	cycles int
	cpuMs  float64
	live   float64 // mean live heap after a collection, MB
}

func readGCTrace(path string) gcTotals {
	b, err := os.ReadFile(path)
	if err != nil {
		return gcTotals{} // a run without GCTRACE=1 has nothing to say
	}
	var t gcTotals
	var live float64
	for _, l := range strings.Split(string(b), "\n") {
		m := gcLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		t.cycles++
		for i := 1; i <= 5; i++ {
			v, _ := strconv.ParseFloat(m[i], 64)
			t.cpuMs += v
		}
		v, _ := strconv.ParseFloat(m[6], 64)
		live += v
	}
	if t.cycles > 0 {
		t.live = live / float64(t.cycles)
	}
	return t
}

func runHandshakePinned(e *env, args []string) error {
	out, rounds, err := outRounds(args, 3, -1)
	if err != nil {
		return err
	}
	builds := args[2:]
	best, wall := map[string]float64{}, map[string]float64{}
	each := map[string]cryptoBench{}
	for _, when := range []string{"before", "after"} {
		c, err := readCryptoBench(join(out, "crypto-"+when+".txt"))
		if err != nil {
			return err
		}
		each[when] = c
		for k, v := range c.cpu {
			if old, ok := best[k]; !ok || v < old {
				best[k] = v
			}
		}
		for k, v := range c.wall {
			if old, ok := wall[k]; !ok || v < old {
				wall[k] = v
			}
		}
	}
	need := []string{"HandshakeCryptoServer", "HandshakeCryptoClient", "X25519KeyGen", "X25519SharedSecret",
		"Ed25519SignCertificateVerify", "Ed25519VerifyCertificateVerify"}
	for _, k := range need {
		if _, ok := best[k]; !ok {
			return fmt.Errorf("crypto-before.txt and crypto-after.txt have no Benchmark%s line", k)
		}
	}
	S, C := best["HandshakeCryptoServer"], best["HandshakeCryptoClient"]
	e.printf("== crypto per full handshake, one core, CPU time per operation (faster of before/after; wall ns/op in brackets):\n")
	for _, k := range need[2:] {
		e.printf("   %-32s %7.1f µs  (%.1f)\n", k, best[k]/1e3, wall[k]/1e3)
	}
	e.printf("   server (keygen + shared + sign)   %7.1f µs: at most %.0f handshakes per server core-second\n", S/1e3, 1e9/S)
	e.printf("   client (keygen + shared + verify) %7.1f µs: at most %.0f handshakes per client core-second\n", C/1e3, 1e9/C)
	bound := 1e9 / max(S, C)
	e.printf("   bound, one core per side: %.0f full handshakes/s\n", bound)
	for _, k := range need[:2] {
		b, okb := each["before"].cpu[k]
		a, oka := each["after"].cpu[k]
		if okb && oka && b != 0 && a != 0 && math.Abs(a-b) > 0.05*min(a, b) {
			e.printf("   WARNING: %s read %.1f µs before the runs and %.1f µs after (%.0f%% apart): the machine's speed "+
				"changed during the run, so the shares below are not measurements; run it again\n", k, b/1e3, a/1e3, 100*math.Abs(a-b)/min(a, b))
		}
	}
	e.printf("== end to end (server core, client core; GOMAXPROCS=1 each). %%bound: hs/s over the bound (wall: the\n")
	e.printf("   cores are shared with whatever else runs); %%cpu: the same with each side's measured CPU per handshake,\n")
	e.printf("   1/max(server, client) over the bound (what the pair does per core-second); %%srv, %%cli: each side's own\n")
	e.printf("   crypto over its CPU per handshake\n")
	e.printf("   %-6s %8s %6s %9s %9s %13s %13s %7s %7s %7s %7s\n", "run", "hs/s", "failed", "srv µs/hs", "cli µs/hs",
		"hs/srv core-s", "hs/cli core-s", "%bound", "%cpu", "%srv", "%cli")
	type row struct{ rate, srv, cli, n float64 }
	rows := map[string]row{}
	key := func(b string, r int) string { return fmt.Sprintf("%s-%d", b, r) }
	for r := 1; r <= rounds; r++ {
		for _, b := range builds {
			name := key(b, r) + ".json"
			d, err := openResult(join(out, name))
			if err != nil {
				return err
			}
			h, err := benchOf(name, d, true)
			if err != nil {
				return err
			}
			n := float64(h.done)
			srv := math.NaN()
			if d.ServerCPU != nil {
				srv = float64(*d.ServerCPU) / n
			}
			cli := float64(d.ClientCPU) / n
			rows[key(b, r)] = row{h.rate, srv, cli, n}
			e.printf("   %-6s %8.1f %6d %9s %9.1f %13s %13.0f %6.1f%% %6s%% %6s%% %6.1f%%\n",
				key(b, r), h.rate, h.bad, num("%.1f", srv/1e3), cli/1e3, num("%.0f", 1e9/srv), 1e9/cli,
				100*h.rate/bound, num("%.1f", 100*max(S, C)/maxNaN(srv, cli)), num("%.1f", 100*S/srv), 100*C/cli)
		}
	}
	type gcRun struct {
		b string
		r int
		gcTotals
	}
	var gcs []gcRun
	for r := 1; r <= rounds; r++ {
		for _, b := range builds {
			if t := readGCTrace(join(out, key(b, r)+"-server.err")); t.cycles > 0 {
				gcs = append(gcs, gcRun{b, r, t})
			}
		}
	}
	if len(gcs) > 0 {
		sort.SliceStable(gcs, func(i, j int) bool {
			if gcs[i].r != gcs[j].r {
				return gcs[i].r < gcs[j].r
			}
			return gcs[i].b < gcs[j].b
		})
		e.printf("== server collections (GODEBUG=gctrace=1; over the whole server run, start-up included)\n")
		for _, g := range gcs {
			n := rows[key(g.b, g.r)].n
			e.printf("   %-6s %5d collections, %6.1f handshakes per collection, %5.1f µs of GC CPU per handshake, live heap after a collection %.2f MB (gctrace rounds to MB)\n",
				key(g.b, g.r), g.cycles, n/float64(g.cycles), g.cpuMs*1e3/n, g.live)
		}
	}
	if len(builds) == 2 {
		e.printf("== new/old per round (rate; CPU per handshake, server and client)\n")
		for r := 1; r <= rounds; r++ {
			o, n := rows[key("old", r)], rows[key("new", r)]
			e.printf("   round %d: rate %s; server CPU/hs %s; client CPU/hs %s\n", r,
				num("%.3f", ratio(n.rate, o.rate)), num("%.3f", ratio(n.srv, o.srv)), num("%.3f", ratio(n.cli, o.cli)))
		}
	}
	m, err := resultMachine(join(out, key(builds[len(builds)-1], 1)+".json"))
	if err != nil {
		return err
	}
	e.printf("machine: %s, %d cores, GOMAXPROCS %d (client), %.1f GiB, kernel %s, nofile %d/%d, somaxconn %d, ports %s, %s, loadproof %s, %s\n",
		m.CPUModel, m.Cores, m.GOMAXPROCS, float64(m.MemoryBytes)/gib, m.Kernel, m.NofileSoft, m.NofileHard, m.Somaxconn,
		m.IPLocalPortRange, m.GoVersion, m.LoadproofVersion, m.CollectedAt.Format("2006-01-02T15:04:05.999999999Z07:00"))
	if la, err := os.ReadFile(e.loadavg); err == nil {
		f := strings.Fields(string(la))
		if len(f) >= 3 {
			e.printf("load average at the end: ['%s', '%s', '%s']\n", f[0], f[1], f[2])
		}
	}
	return nil
}

// maxNaN is the larger of a and b, NaN when either is (Python's max with a NaN first).
func maxNaN(a, b float64) float64 {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.NaN()
	}
	return max(a, b)
}
