// Package machine builds the machine record that every loadproof result carries: what the figures were
// measured on (CPU, cores, memory, kernel), the operating-system limits that bound them (open files,
// somaxconn, the ephemeral port range) and the software and settings in force. Upstream LinkKeys' rule
// (docs/protocol-linkkeys.md, Scale profile) is that a capacity claim without this record is not
// evidence.
package machine

import (
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/loadproof/loadproof/internal/cost"
)

// Version is loadproof's version, set at link time with
// -ldflags "-X github.com/loadproof/loadproof/internal/machine.Version=v1.2.3"; otherwise it comes from
// the module build info, or "devel".
var Version = ""

// Record describes the machine and settings a result was measured with. Fields that could not be read
// are left empty (or zero), which reports print as unknown, rather than guessed. Linux fills every
// field; macOS and FreeBSD all of them too (from sysctl); Windows only the kernel (its version) beside
// the fields Go itself knows, since it has no open-file limits, somaxconn or port-range settings of
// that kind.
type Record struct {
	Hostname string `json:"hostname,omitempty"`
	// CostPerHour is the machine's price per hour when one was given (a worker's --cost-per-hour):
	// how a distributed run's cost adds every machine up (docs/cost.md).
	CostPerHour      cost.Price        `json:"cost_per_hour,omitzero"`
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
	// Run holds what the kernel and this process counted over the run this record belongs to, and
	// whether the generator saturated (nil where no run was measured, or in files from before it).
	Run         *RunStats `json:"run,omitempty"`
	CollectedAt time.Time `json:"collected_at"`
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
	collectOS(&r)
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

// RSSBytes returns this process's resident set size in bytes, and false when it cannot be read (on
// every system but Linux, where it is VmRSS).
func RSSBytes() (uint64, bool) { return rssBytes() }

// Nofile returns the soft and hard open-file limits (RLIMIT_NOFILE); on Windows, which has no such
// limit, an error.
func Nofile() (soft, hard uint64, err error) { return nofile() }

// RaiseNofile raises the soft open-file limit to the hard limit and returns the new soft limit. Load
// tools call it at start, since the soft limit is often far below the hard one. On macOS the hard
// limit may be "unlimited", which the kernel refuses as a soft limit; there it raises to
// kern.maxfilesperproc. On Windows, which has no such limit, it returns an error.
func RaiseNofile() (uint64, error) { return raiseNofile() }
