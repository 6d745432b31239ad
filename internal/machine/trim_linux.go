package machine

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// TrimCodePages drops this process's mappings of its own executable's
// read-only pages (code, read-only data, the function tables), so that its
// resident set counts the code it runs from now on rather than every page it
// ever touched. The pages stay in the page cache; the next access maps one
// back (a minor fault, with the kernel's fault-around mapping its cached
// neighbours too). A mapping holding anonymous pages (a private copy the
// process wrote, such as relocated read-only data in a position-independent
// executable) is left alone: those pages exist nowhere else. It returns the
// resident bytes the dropped mappings held. Only Linux has it; elsewhere it
// does nothing and returns an error saying so.
func TrimCodePages() (uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/self/exe", &st); err != nil {
		return 0, fmt.Errorf("machine: trimming code pages: %w", err)
	}
	text, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return 0, fmt.Errorf("machine: trimming code pages: %w", err)
	}
	maps, err := ParseProcMaps(text)
	if err != nil {
		return 0, fmt.Errorf("machine: trimming code pages: %w", err)
	}
	var dropped uint64
	for _, m := range maps {
		if m.Inode != st.Ino || m.Writable() || m.Anonymous != 0 || m.Rss == 0 {
			continue
		}
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(m.Start), uintptr(m.End-m.Start), unix.MADV_DONTNEED); errno != 0 {
			return dropped, fmt.Errorf("machine: trimming code pages: madvise %#x-%#x: %w", m.Start, m.End, errno)
		}
		dropped += m.Rss
	}
	return dropped, nil
}
