package machine

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// collectOS fills the Linux fields: /proc has all of them.
func collectOS(r *Record) {
	collectUnix(r)
	r.CPUModel = cpuModel()
	r.MemoryBytes = memTotal()
	if s := readTrim("/proc/sys/net/core/somaxconn"); s != "" {
		r.Somaxconn, _ = strconv.Atoi(s)
	}
	r.IPLocalPortRange = strings.Join(strings.Fields(readTrim("/proc/sys/net/ipv4/ip_local_port_range")), "-")
}

// nofileCap is 0: Linux accepts any soft limit up to the hard one.
func nofileCap() uint64 { return 0 }

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func memTotal() uint64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			fs := strings.Fields(rest)
			if len(fs) >= 1 {
				kb, _ := strconv.ParseUint(fs[0], 10, 64)
				return kb * 1024
			}
		}
	}
	return 0
}

func rssBytes() (uint64, bool) {
	r, ok := rssSplit()
	return r.Total, ok
}

func rssSplit() (RSS, bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return RSS{}, false
	}
	r, err := ParseProcStatusRSS(b)
	return r, err == nil
}
