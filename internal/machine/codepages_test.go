package machine

import (
	"strings"
	"testing"
)

const smapsSample = `00400000-00a4f000 r-xp 00000000 08:01 1234567                            /usr/local/bin/linkkeys-server
Size:               6460 kB
Rss:                6012 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me dw sd
00a4f000-0112f000 r--p 0064f000 08:01 1234567                            /usr/local/bin/linkkeys-server
Size:               7040 kB
Rss:                5120 kB
Anonymous:             8 kB
0112f000-01160000 rw-p 00d2f000 08:01 1234567                            /usr/local/bin/linkkeys-server
Rss:                 196 kB
c000000000-c000400000 rw-p 00000000 00:00 0 
Rss:                2048 kB
Anonymous:          2048 kB
7ffd6c1e1000-7ffd6c202000 rw-p 00000000 00:00 0                          [stack]
7f0000000000-7f0000001000 r--p 00000000 08:01 99                         /tmp/x (deleted)
`

func TestParseProcMaps(t *testing.T) {
	ms, err := ParseProcMaps([]byte(smapsSample))
	if err != nil {
		t.Fatal(err)
	}
	want := []Mapping{
		{Start: 0x400000, End: 0xa4f000, Perms: "r-xp", Offset: 0, Inode: 1234567, Path: "/usr/local/bin/linkkeys-server", Rss: 6012 << 10},
		{Start: 0xa4f000, End: 0x112f000, Perms: "r--p", Offset: 0x64f000, Inode: 1234567, Path: "/usr/local/bin/linkkeys-server", Rss: 5120 << 10, Anonymous: 8 << 10},
		{Start: 0x112f000, End: 0x1160000, Perms: "rw-p", Offset: 0xd2f000, Inode: 1234567, Path: "/usr/local/bin/linkkeys-server", Rss: 196 << 10},
		{Start: 0xc000000000, End: 0xc000400000, Perms: "rw-p", Rss: 2048 << 10, Anonymous: 2048 << 10},
		{Start: 0x7ffd6c1e1000, End: 0x7ffd6c202000, Perms: "rw-p", Path: "[stack]"},
		{Start: 0x7f0000000000, End: 0x7f0000001000, Perms: "r--p", Inode: 99, Path: "/tmp/x (deleted)"},
	}
	if len(ms) != len(want) {
		t.Fatalf("got %d mappings, want %d: %+v", len(ms), len(want), ms)
	}
	for i := range want {
		if ms[i] != want[i] {
			t.Errorf("mapping %d: got %+v, want %+v", i, ms[i], want[i])
		}
	}
	if ms[0].Writable() || !ms[2].Writable() {
		t.Errorf("Writable: r-xp gives %v, rw-p gives %v", ms[0].Writable(), ms[2].Writable())
	}
	for _, c := range []struct{ name, text, err string }{
		{"attribute first", "Rss: 4 kB\n", "line 1: Rss before any mapping"},
		{"no dash", "00400000 r-xp 00000000 08:01 1 /x\n", `line 1: address range "00400000" is not start-end`},
		{"bad start", "0040000g-00a4f000 r-xp 00000000 08:01 1 /x\n", `start address "0040000g" is not hexadecimal`},
		{"reversed", "00a4f000-00400000 r-xp 00000000 08:01 1 /x\n", "ends before it starts"},
		{"perms", "00400000-00a4f000 r-x 00000000 08:01 1 /x\n", `permissions "r-x" are not four letters`},
		{"offset", "00400000-00a4f000 r-xp zz 08:01 1 /x\n", `offset "zz" is not hexadecimal`},
		{"inode", "00400000-00a4f000 r-xp 00000000 08:01 -1 /x\n", `inode "-1" is not a decimal number`},
		{"short", "00400000-00a4f000 r-xp 00000000\n", "no device field"},
		{"rss unit", "00400000-00a4f000 r-xp 00000000 08:01 1 /x\nRss: 4 MB\n", `line 2: Rss is " 4 MB": want a whole number and kB`},
		{"too long", strings.Repeat("x", MaxProcMapsBytes+1), "more than the"},
	} {
		_, err := ParseProcMaps([]byte(c.text))
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: got error %v, want one containing %q", c.name, err, c.err)
		}
	}
}

// FuzzParseProcMaps: no input panics, and what parses is consistent.
func FuzzParseProcMaps(f *testing.F) {
	f.Add([]byte(smapsSample))
	f.Add([]byte("0-1 ---p 0 0:0 0\n"))
	f.Add([]byte("00400000-00a4f000 r-xp 00000000 08:01 1 /x\nRss: 18014398509481984 kB\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ms, err := ParseProcMaps(b)
		if err != nil {
			if ms != nil {
				t.Fatalf("error %v with mappings %+v", err, ms)
			}
			return
		}
		for _, m := range ms {
			if m.End < m.Start || len(m.Perms) != 4 || m.Rss%1024 != 0 || m.Anonymous%1024 != 0 {
				t.Fatalf("inconsistent mapping %+v", m)
			}
		}
	})
}
