// Package machine builds the machine record that every loadproof result carries: what the figures were
// measured on (CPU, cores, memory, kernel), the operating-system limits that bound them (open files,
// somaxconn, the ephemeral port range) and the software and settings in force. Upstream LinkKeys' rule
// (docs/protocol-linkkeys.md, Scale profile) is that a capacity claim without this record is not
// evidence.
package machine

import (
	"bufio"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Version is loadproof's version, set at link time with
// -ldflags "-X github.com/loadproof/loadproof/internal/machine.Version=v1.2.3"; otherwise it comes from
// the module build info, or "devel".
var Version = ""

// Record describes the machine and settings a result was measured with. Fields that could not be read
// are left empty (or zero) rather than guessed.
type Record struct {
	Hostname         string            `json:"hostname,omitempty"`
	OS               string            `json:"os"`
	Arch             string            `json:"arch"`
	Kernel           string            `json:"kernel,omitempty"`
	CPUModel         string            `json:"cpu_model,omitempty"`
	Cores            int               `json:"cores"`
	GOMAXPROCS       int               `json:"gomaxprocs"`
	MemoryBytes      uint64            `json:"memory_bytes,omitempty"`
	NofileSoft       uint64            `json:"nofile_soft,omitempty"`
	NofileHard       uint64            `json:"nofile_hard,omitempty"`
	Somaxconn        int               `json:"somaxconn,omitempty"`
	IPLocalPortRange string            `json:"ip_local_port_range,omitempty"`
	GoVersion        string            `json:"go_version"`
	LoadproofVersion string            `json:"loadproof_version"`
	Settings         map[string]string `json:"settings,omitempty"`
	Target           string            `json:"target,omitempty"`
	CollectedAt      time.Time         `json:"collected_at"`
}

// Collect reads the record of the machine this process runs on. Settings holds every environment
// variable whose name starts with one of prefixes (for example "TCP_", "PUBLIC_READ_"), so the limits
// in force travel with the result.
func Collect(prefixes ...string) Record {
	r := Record{
		OS:               runtime.GOOS,
		Arch:             runtime.GOARCH,
		Cores:            runtime.NumCPU(),
		GOMAXPROCS:       runtime.GOMAXPROCS(0),
		GoVersion:        runtime.Version(),
		LoadproofVersion: LoadproofVersion(),
		CollectedAt:      time.Now().UTC(),
	}
	r.Hostname, _ = os.Hostname()
	var uts unix.Utsname
	if unix.Uname(&uts) == nil {
		r.Kernel = unix.ByteSliceToString(uts.Release[:])
	}
	r.CPUModel = cpuModel()
	r.MemoryBytes = memTotal()
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) == nil {
		r.NofileSoft, r.NofileHard = lim.Cur, lim.Max
	}
	if s := readTrim("/proc/sys/net/core/somaxconn"); s != "" {
		r.Somaxconn, _ = strconv.Atoi(s)
	}
	r.IPLocalPortRange = strings.Join(strings.Fields(readTrim("/proc/sys/net/ipv4/ip_local_port_range")), "-")
	r.Settings = settings(os.Environ(), prefixes)
	return r
}

// LoadproofVersion returns the version stamped into this binary.
func LoadproofVersion() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

func settings(environ []string, prefixes []string) map[string]string {
	if len(prefixes) == 0 {
		return nil
	}
	out := map[string]string{}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		for _, p := range prefixes {
			if strings.HasPrefix(k, p) {
				out[k] = v
				break
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// SettingNames returns the sorted names in r.Settings, for stable printing.
func (r Record) SettingNames() []string {
	names := make([]string, 0, len(r.Settings))
	for k := range r.Settings {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

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

// RSSBytes returns this process's resident set size (VmRSS) in bytes, and false when it cannot be read.
func RSSBytes() (uint64, bool) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			fs := strings.Fields(rest)
			if len(fs) >= 1 {
				kb, err := strconv.ParseUint(fs[0], 10, 64)
				if err != nil {
					return 0, false
				}
				return kb * 1024, true
			}
		}
	}
	return 0, false
}

// RaiseNofile raises the soft open-file limit to the hard limit and returns the new soft limit. Load
// tools call it at start, since the soft limit is often far below the hard one.
func RaiseNofile() (uint64, error) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
			return 0, err
		}
	}
	return lim.Cur, nil
}
