package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// rssMetrics is what bench/linkkeys-ddos-rss.sh reads of a server METRICS line.
type rssMetrics struct {
	Accepted float64 `json:"accepted_connections"`
	RSS      float64 `json:"process_rss_bytes"`
	Anon     float64 `json:"process_rss_anon_bytes"`
	File     float64 `json:"process_rss_file_bytes"`
	Shmem    float64 `json:"process_rss_shmem_bytes"`
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
	if err := wantArgs(args, 3, -1); err != nil {
		return err
	}
	out := args[0]
	rounds, err := intArg("ROUNDS", args[1])
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
	worst := map[string]rssMetrics{}
	for r := 1; r <= rounds; r++ {
		for _, kind := range kinds {
			name := fmt.Sprintf("%s-%d", kind, r)
			ms, err := metricsLines[rssMetrics](join(out, name+"-server.log"))
			if err != nil {
				return err
			}
			var idle, top *rssMetrics
			for i := range ms {
				if ms[i].Accepted == 0 {
					idle = &ms[i]
				}
				if top == nil || ms[i].RSS > top.RSS {
					top = &ms[i]
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
			var d sideBySideResult
			if err := readJSON(join(out, name+".json"), &d); err != nil {
				return err
			}
			if d.Attempts == nil {
				return fmt.Errorf("%s.json has no attempts section", name)
			}
			verdict := "exact"
			if ok, why := d.Server.exact(); !ok {
				verdict = "MISMATCH " + why
			}
			a := d.Attempts
			e.printf("%-11s idle %5.1f MiB (anon %4.1f file %4.1f) | METRICS max %5.1f MiB (anon %4.1f file %4.1f) | /proc 0.1 s max %5.1f MiB (anon %4.1f file %4.1f) | %.0f sources: allowed %.0f denied %.0f, accounting %s\n",
				name, idle.RSS/mib, idle.Anon/mib, idle.File/mib, top.RSS/mib, top.Anon/mib, top.File/mib,
				ptop.rss/mib, ptop.anon/mib, ptop.file/mib, a.Attempted, a.Succeeded, a.Failed, verdict)
			if w, ok := worst[kind]; !ok || top.RSS > w.RSS {
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
		if w.RSS <= 20*mib {
			cmp = "<="
		}
		e.printf("worst %-9s: server RSS max %.1f MiB (anon %.1f, file %.1f, shmem %.1f) %s 20 MiB\n",
			kind, w.RSS/mib, w.Anon/mib, w.File/mib, w.Shmem/mib, cmp)
	}
	e.printf("lean/fat RSS max: %s; lean/leangc100 (the GC pacer): %s\n",
		num("%.2f", ratio(worst["lean"].RSS, worst["fat"].RSS)), num("%.2f", ratio(worst["lean"].RSS, worst["leangc100"].RSS)))
	if w, ok := worst["leanold"]; ok {
		e.printf("lean/leanold RSS max: %s\n", num("%.2f", ratio(worst["lean"].RSS, w.RSS)))
	}
	m, err := resultMachine(join(out, "fat-1.json"))
	if err != nil {
		return err
	}
	e.printf("machine: %s, %d cores, %.1f GiB, kernel %s, nofile %d/%d, %s, loadproof %s\n",
		m.CPUModel, m.Cores, float64(m.MemoryBytes)/gib, m.Kernel, m.NofileSoft, m.NofileHard, m.GoVersion, m.LoadproofVersion)
	return nil
}
