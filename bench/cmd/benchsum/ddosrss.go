package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/loadproof/loadproof/internal/linkkeys"
)

// rssFigures is the resident memory of a server at one METRICS line, in bytes: total (0 when the
// server could not read it), anonymous, file-backed, shared.
type rssFigures struct{ rss, anon, file, shmem float64 }

func figuresOf(m linkkeys.MetricsLine) rssFigures {
	f := rssFigures{anon: float64(m.ProcessRSSAnonBytes), file: float64(m.ProcessRSSFileBytes), shmem: float64(m.ProcessRSSShmemBytes)}
	if m.ProcessRSSBytes != nil {
		f.rss = float64(*m.ProcessRSSBytes)
	}
	return f
}

// procSample is one line of the script's /proc/PID/status sampler, in bytes:
// "VmRSS: KB RssAnon: KB RssFile: KB TIME".
type procSample struct{ rss, anon, file float64 }

func readProcSamples(path string) ([]procSample, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []procSample
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) != 7 {
			continue // the process ended mid-read
		}
		kv := map[string]float64{}
		for i := 0; i < 6; i += 2 {
			v, err := strconv.ParseFloat(f[i+1], 64)
			if err != nil {
				return nil, fmt.Errorf("%s: %q: %s is not a number of KiB", path, l, f[i+1])
			}
			kv[f[i]] = v * 1024
		}
		out = append(out, procSample{kv["VmRSS:"], kv["RssAnon:"], kv["RssFile:"]})
	}
	return out, nil
}

const mib = 1 << 20

func runDDoSRSS(e *env, args []string) error {
	out, rounds, err := outRounds(args, 3, -1)
	if err != nil {
		return err
	}
	if _, err := intArg("SOURCES", args[2]); err != nil {
		return err
	}
	kinds := []string{"fat", "lean", "leangc100"}
	for _, k := range args[3:] {
		if k != "" {
			kinds = append(kinds, k)
		}
	}
	bins, err := os.ReadFile(join(out, "binaries.txt"))
	if err != nil {
		return err
	}
	e.printf("== summary (from the files in %s)\n%s\n", out, strings.TrimSpace(string(bins)))
	worst := map[string]rssFigures{}
	for r := 1; r <= rounds; r++ {
		for _, kind := range kinds {
			name := fmt.Sprintf("%s-%d", kind, r)
			ms, err := readMetricsLog(join(out, name+"-server.log"))
			if err != nil {
				return err
			}
			var idle, top *rssFigures
			for _, m := range ms {
				f := figuresOf(m)
				if m.AcceptedConnections == 0 {
					idle = &f
				}
				if top == nil || f.rss > top.rss {
					top = &f
				}
			}
			if idle == nil {
				return fmt.Errorf("%s-server.log: no METRICS line before the burst (accepted_connections 0)", name)
			}
			pr, err := readProcSamples(join(out, name+"-proc.txt"))
			if err != nil {
				return err
			}
			if len(pr) == 0 {
				return fmt.Errorf("%s-proc.txt: no samples", name)
			}
			ptop := pr[0]
			for _, p := range pr[1:] {
				if p.rss > ptop.rss {
					ptop = p
				}
			}
			d, err := openResult(join(out, name+".json"))
			if err != nil {
				return err
			}
			a, verdict, err := ddosAttempts(name+".json", d)
			if err != nil {
				return err
			}
			e.printf("%-11s idle %5.1f MiB (anon %4.1f file %4.1f) | METRICS max %5.1f MiB (anon %4.1f file %4.1f) | /proc 0.1 s max %5.1f MiB (anon %4.1f file %4.1f) | %d sources: allowed %d denied %d, accounting %s\n",
				name, idle.rss/mib, idle.anon/mib, idle.file/mib, top.rss/mib, top.anon/mib, top.file/mib,
				ptop.rss/mib, ptop.anon/mib, ptop.file/mib, a.Attempted, a.Succeeded, a.Failed, verdict)
			if w, ok := worst[kind]; !ok || top.rss > w.rss {
				worst[kind] = *top
			}
		}
	}
	if rounds == 0 {
		return nil
	}
	for _, kind := range kinds {
		w := worst[kind]
		cmp := ">"
		if w.rss <= 20*mib {
			cmp = "<="
		}
		e.printf("worst %-9s: server RSS max %.1f MiB (anon %.1f, file %.1f, shmem %.1f) %s 20 MiB\n",
			kind, w.rss/mib, w.anon/mib, w.file/mib, w.shmem/mib, cmp)
	}
	e.printf("lean/fat RSS max: %s; lean/leangc100 (the GC pacer): %s\n",
		num("%.2f", ratio(worst["lean"].rss, worst["fat"].rss)), num("%.2f", ratio(worst["lean"].rss, worst["leangc100"].rss)))
	if w, ok := worst["leanold"]; ok {
		e.printf("lean/leanold RSS max: %s\n", num("%.2f", ratio(worst["lean"].rss, w.rss)))
	}
	m, err := resultMachine(join(out, "fat-1.json"))
	if err != nil {
		return err
	}
	e.printf("machine: %s, %d cores, %.1f GiB, kernel %s, nofile %d/%d, %s, loadproof %s\n",
		m.CPUModel, m.Cores, float64(m.MemoryBytes)/gib, m.Kernel, m.NofileSoft, m.NofileHard, m.GoVersion, m.LoadproofVersion)
	return nil
}
