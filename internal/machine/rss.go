package machine

import (
	"bufio"
	"bytes"
	"fmt"
	"github.com/loadproof/loadproof/internal/textclip"
	"strconv"
)

// RSS is a process's resident memory, whole and split by kind, as Linux
// reports it in /proc/<pid>/status (VmRSS = RssAnon + RssFile + RssShmem).
// Anonymous pages are what the process allocated (heap, stacks, runtime
// structures); file-backed pages are mapped files, above all the binary's own
// code and read-only data, which are clean page cache shared with every other
// process mapping the same file; shared-memory pages are shmem and tmpfs
// mappings.
type RSS struct {
	// Total is VmRSS.
	Total uint64 `json:"total_bytes"`
	// Anon is RssAnon.
	Anon uint64 `json:"anon_bytes"`
	// File is RssFile.
	File uint64 `json:"file_bytes"`
	// Shmem is RssShmem.
	Shmem uint64 `json:"shmem_bytes"`
}

// MaxProcStatusBytes bounds the /proc status text [ParseProcStatusRSS] reads;
// a real one is about 1.5 KB.
const MaxProcStatusBytes = 64 << 10

// ParseProcStatusRSS reads the resident-memory lines of a Linux
// /proc/<pid>/status text ("VmRSS:", "RssAnon:", "RssFile:", "RssShmem:",
// each a whole number and "kB"). Every one of the four must be present once;
// other lines are skipped. Errors name the line and what was expected.
func ParseProcStatusRSS(text []byte) (RSS, error) {
	if len(text) > MaxProcStatusBytes {
		return RSS{}, fmt.Errorf("machine: /proc status: %d bytes is more than the %d a status file may be", len(text), MaxProcStatusBytes)
	}
	var r RSS
	fields := [...]struct {
		key  string
		dst  *uint64
		seen bool
	}{{"VmRSS:", &r.Total, false}, {"RssAnon:", &r.Anon, false}, {"RssFile:", &r.File, false}, {"RssShmem:", &r.Shmem, false}}
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 0, 4096), MaxProcStatusBytes)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		for i := range fields {
			f := &fields[i]
			rest, ok := bytes.CutPrefix(line, []byte(f.key))
			if !ok {
				continue
			}
			if f.seen {
				return RSS{}, fmt.Errorf("machine: /proc status line %d: %s appears twice", n, f.key[:len(f.key)-1])
			}
			f.seen = true
			kb, err := parseKB(rest)
			if err != nil {
				return RSS{}, fmt.Errorf("machine: /proc status line %d: %s %w", n, f.key[:len(f.key)-1], err)
			}
			*f.dst = kb * 1024
		}
	}
	if err := sc.Err(); err != nil {
		return RSS{}, fmt.Errorf("machine: /proc status: %w", err)
	}
	var missing []string
	for _, f := range fields {
		if !f.seen {
			missing = append(missing, f.key[:len(f.key)-1])
		}
	}
	if len(missing) > 0 {
		return RSS{}, fmt.Errorf("machine: /proc status lacks %v (Linux 4.5 or later reports them)", missing)
	}
	return r, nil
}

// parseKB parses " <whole number> kB" (any blanks between).
func parseKB(rest []byte) (uint64, error) {
	fs := bytes.Fields(rest)
	if len(fs) != 2 || string(fs[1]) != "kB" {
		return 0, fmt.Errorf("is %q: want a whole number and kB", textclip.Bytes(rest, 40))
	}
	kb, err := strconv.ParseUint(string(fs[0]), 10, 64)
	if err != nil || kb > 1<<53 {
		return 0, fmt.Errorf("is %q: want a whole number of kB below 2^53", textclip.Bytes(fs[0], 40))
	}
	return kb, nil
}

// RSSSplit returns this process's resident memory split by kind, and false
// when it cannot be read (on every system but Linux).
func RSSSplit() (RSS, bool) { return rssSplit() }
