package machine

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
)

// Mapping is one line of a Linux /proc/<pid>/maps text: an address range, its
// permissions and, for a file mapping, the file's inode and path.
type Mapping struct {
	Start, End uint64
	// Perms is the four-letter permission field ("r-xp", "rw-p", …).
	Perms string
	// Offset is the offset into the file.
	Offset uint64
	// Inode is the file's inode (0 for anonymous mappings).
	Inode uint64
	// Path is the rest of the line: a file path (" (deleted)" kept), a
	// pseudo-path such as "[stack]", or empty.
	Path string
	// Rss and Anonymous are the mapping's resident and anonymous bytes, from
	// a /proc/<pid>/smaps text (zero when read from maps). In a private file
	// mapping, anonymous pages are copies the process wrote (relocations, for
	// one): they exist nowhere else.
	Rss, Anonymous uint64
}

// Writable reports whether the mapping may be written.
func (m Mapping) Writable() bool { return len(m.Perms) > 1 && m.Perms[1] == 'w' }

// MaxProcMapsBytes bounds the /proc maps text [ParseProcMaps] reads; a Go
// server's is a few kilobytes.
const MaxProcMapsBytes = 4 << 20

// ParseProcMaps reads a Linux /proc/<pid>/maps or /proc/<pid>/smaps text:
// one mapping per line, "start-end perms offset dev inode [path]" with
// hexadecimal addresses and offset and a decimal inode; in smaps each is
// followed by "Key: value" lines, of which "Rss:" and "Anonymous:" (a number
// and "kB") are kept. Errors name the line and the field.
func ParseProcMaps(text []byte) ([]Mapping, error) {
	if len(text) > MaxProcMapsBytes {
		return nil, fmt.Errorf("machine: /proc maps: %d bytes is more than the %d this reader accepts", len(text), MaxProcMapsBytes)
	}
	var out []Mapping
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 0, 4096), MaxProcMapsBytes)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if key, rest, ok := smapsAttribute(line); ok {
			if len(out) == 0 {
				return nil, fmt.Errorf("machine: /proc maps line %d: %s before any mapping", n, key)
			}
			var dst *uint64
			switch key {
			case "Rss":
				dst = &out[len(out)-1].Rss
			case "Anonymous":
				dst = &out[len(out)-1].Anonymous
			default:
				continue
			}
			kb, err := parseKB(rest)
			if err != nil {
				return nil, fmt.Errorf("machine: /proc maps line %d: %s %w", n, key, err)
			}
			*dst = kb * 1024
			continue
		}
		m, err := parseMapsLine(line)
		if err != nil {
			return nil, fmt.Errorf("machine: /proc maps line %d: %w", n, err)
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("machine: /proc maps: %w", err)
	}
	return out, nil
}

func parseMapsLine(line []byte) (Mapping, error) {
	var m Mapping
	field := func(name string) ([]byte, error) {
		line = bytes.TrimLeft(line, " ")
		i := bytes.IndexByte(line, ' ')
		if i < 0 {
			i = len(line)
		}
		f := line[:i]
		line = line[i:]
		if len(f) == 0 {
			return nil, fmt.Errorf("no %s field", name)
		}
		return f, nil
	}
	rng, err := field("address range")
	if err != nil {
		return m, err
	}
	lo, hi, ok := bytes.Cut(rng, []byte{'-'})
	if !ok {
		return m, fmt.Errorf("address range %q is not start-end", rng)
	}
	if m.Start, err = strconv.ParseUint(string(lo), 16, 64); err != nil {
		return m, fmt.Errorf("start address %q is not hexadecimal", lo)
	}
	if m.End, err = strconv.ParseUint(string(hi), 16, 64); err != nil {
		return m, fmt.Errorf("end address %q is not hexadecimal", hi)
	}
	if m.End < m.Start {
		return m, fmt.Errorf("address range %q ends before it starts", rng)
	}
	perms, err := field("permissions")
	if err != nil {
		return m, err
	}
	if len(perms) != 4 {
		return m, fmt.Errorf("permissions %q are not four letters", perms)
	}
	m.Perms = string(perms)
	off, err := field("offset")
	if err != nil {
		return m, err
	}
	if m.Offset, err = strconv.ParseUint(string(off), 16, 64); err != nil {
		return m, fmt.Errorf("offset %q is not hexadecimal", off)
	}
	if _, err := field("device"); err != nil {
		return m, err
	}
	ino, err := field("inode")
	if err != nil {
		return m, err
	}
	if m.Inode, err = strconv.ParseUint(string(ino), 10, 64); err != nil {
		return m, fmt.Errorf("inode %q is not a decimal number", ino)
	}
	m.Path = string(bytes.TrimLeft(line, " "))
	return m, nil
}

// smapsAttribute splits an smaps attribute line ("Rss:   12 kB", "VmFlags:
// rd ex"): a first field of letters, digits and underscores ending in a
// colon. A mapping line's first field is an address range and has no colon.
func smapsAttribute(line []byte) (key string, rest []byte, ok bool) {
	i := bytes.IndexByte(line, ':')
	if i <= 0 {
		return "", nil, false
	}
	for _, c := range line[:i] {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return "", nil, false
		}
	}
	return string(line[:i]), line[i+1:], true
}
