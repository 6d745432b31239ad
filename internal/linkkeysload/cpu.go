package linkkeysload

import (
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/loadproof/loadproof/internal/machine"
)

// CPU figures tell where the time of a run went on a machine whose client and server share the
// cores: a rate below target is either the client's cost or the server's, and these say which.

// processCPU is this process's CPU time so far (0 where it cannot be read).
func processCPU() time.Duration { return machine.ProcessCPU() }

// userHZ is the unit of the CPU times in /proc/<pid>/stat (USER_HZ, 100 on Linux).
const userHZ = 100

// ServerCPU returns the CPU time (user plus system) used so far by the server process pid and its
// direct children (the processes of `server --processes N`), read from /proc. ok is false when the
// process cannot be read (not on this machine, or gone).
func ServerCPU(pid int) (time.Duration, bool) {
	if pid <= 0 {
		return 0, false
	}
	own, ok := procStatCPU(pid)
	if !ok {
		return 0, false
	}
	total := own
	for _, child := range procChildren(pid) {
		if c, ok := procStatCPU(child); ok {
			total += c
		}
	}
	return total, true
}

// procStatCPU reads utime+stime of one process.
func procStatCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name (field 2) is in parentheses and may hold spaces; fields after the last ')'
	// start with field 3 (state). utime and stime are fields 14 and 15.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(ut+st) * time.Second / userHZ, true
}

// processRunning reports whether process pid is running on this machine (not gone, not a zombie);
// known is false when that cannot be told (no pid, no /proc).
func processRunning(pid int) (running, known bool) {
	if pid <= 0 {
		return false, false
	}
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		return false, false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false, true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return false, false
	}
	state := s[i+2]
	return state != 'Z' && state != 'X', true
}

// processStopped reports whether pid is stopped (SIGSTOP, or traced and stopped): state T or t in
// /proc/PID/stat. False where that cannot be told.
func processStopped(pid int) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return false
	}
	return s[i+2] == 'T' || s[i+2] == 't'
}

// serverStopped says why the target's server cannot be read now, or "": its process (the info
// file's pid, when that process listens on the target's port) is stopped, so a scrape of its
// metrics would only wait out its timeout.
func serverStopped(t Target) string {
	pid := int(t.PID)
	if owns, known := listensOn(pid, t.Addr.Port()); !known || !owns || !processStopped(pid) {
		return ""
	}
	return "the server process (pid " + strconv.Itoa(pid) + ") is stopped: resume it (SIGCONT) to read its accounting"
}

// procChildren lists the direct children of pid (from every thread's children file).
func procChildren(pid int) []int {
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return nil
	}
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + t.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// Garbage-collector pacing for the runs whose live heap is small and whose garbage is large. A TLS
// handshake leaves about 30 KB of garbage on the client, and handshake-bench and ddos hold almost
// nothing live (at most --concurrency handshakes in flight), so with the default GOGC=100 the
// collector runs hundreds of times a second; measured on the 2-core machine, GOGC=800 cut the
// client's CPU per handshake by about 15 % (300 µs to 250 µs) for a few MB of heap. A connections
// ramp holds every connection, so its live heap grows with the count (a bare socket's descriptor,
// poller entry and file; more with --keep-tls-state): at GOGC=800 the heap grows to nine times that,
// and each fresh page costs a fault (2.6 faults per connection measured at 800 during a ramp, a fresh
// page about 4 µs on the 2-vCPU guest), so the ramp runs at GOGC=200: side by side, 200,000-
// connection ramps ran 3-6 % faster than at 800 (docs/load-testing.md). The held-RSS figure is taken
// after a forced GC either way. An explicit GOGC in the environment always wins.
const (
	gcPercentChurn = 800
	gcPercentRamp  = 200
)

// tuneGC sets the GC percent for a run and returns the function that restores it.
func tuneGC(percent int) (restore func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	old := debug.SetGCPercent(percent)
	return func() { debug.SetGCPercent(old) }
}

// listensOn reports whether process pid, or one of its direct children (the processes of `server
// --processes N`), holds a listening TCP socket on port: a stale info file can name a pid that now
// belongs to another process, whose CPU is not the server's. It reads the process's own network
// namespace's socket table (/proc/PID/net/tcp, tcp6) and its open files. known is false where
// that cannot be told (no /proc, no permission).
func listensOn(pid int, port uint16) (owns, known bool) {
	if pid <= 0 || port == 0 {
		return false, false
	}
	base := "/proc/" + strconv.Itoa(pid)
	inodes := map[string]bool{}
	readable := false
	for _, tbl := range []string{"/net/tcp", "/net/tcp6"} {
		b, err := os.ReadFile(base + tbl)
		if err != nil {
			continue
		}
		readable = true
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			if len(f) < 10 || f[3] != "0A" {
				continue
			}
			_, hexPort, ok := strings.Cut(f[1], ":")
			if p, err := strconv.ParseUint(hexPort, 16, 16); ok && err == nil && uint16(p) == port {
				inodes["socket:["+f[9]+"]"] = true
			}
		}
	}
	if !readable {
		return false, false
	}
	if len(inodes) == 0 {
		return false, true
	}
	fdKnown := false
	for _, p := range append([]int{pid}, procChildren(pid)...) {
		dir := "/proc/" + strconv.Itoa(p) + "/fd"
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		fdKnown = true
		for _, e := range ents {
			if l, err := os.Readlink(dir + "/" + e.Name()); err == nil && inodes[l] {
				return true, true
			}
		}
	}
	return false, fdKnown
}
