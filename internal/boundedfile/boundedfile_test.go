package boundedfile

import (
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

var small = Kind{Name: "test file", Max: 16}

func TestRead(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ok := write("ok", "0123456789abcdef") // exactly the cap
	big := write("big", "0123456789abcdefX")
	link := filepath.Join(dir, "link")
	if err := os.Symlink(ok, link); err != nil {
		t.Fatal(err)
	}
	zlink := filepath.Join(dir, "zero")
	if err := os.Symlink("/dev/zero", zlink); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, tc := range []struct {
		name, path, want string
	}{
		{"at the cap", ok, ""},
		{"symlink to a regular file", link, ""},
		{"over the cap", big, "is larger than the 16-byte cap on test files"},
		{"/dev/zero", "/dev/zero", "is a character device, not a regular file"},
		{"symlink to /dev/zero", zlink, "is a character device"},
		{"fifo", fifo, "is a named pipe (FIFO)"},
		{"socket", sock, "is a socket"},
		{"directory", dir, "is a directory"},
		{"missing", filepath.Join(dir, "nope"), "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Read(tc.path, small)
			if tc.want == "" {
				if err != nil || string(b) != "0123456789abcdef" {
					t.Fatalf("Read = %q, %v", b, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.path) {
				t.Fatalf("Read err = %v; want it to name %s and say %q", err, tc.path, tc.want)
			}
			r, err := Open(tc.path, small)
			if err == nil {
				r.Close()
				t.Fatalf("Open accepted %s", tc.path)
			}
		})
	}
	if _, err := Read(filepath.Join(dir, "nope"), small); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v does not wrap fs.ErrNotExist", err)
	}
	if _, err := Read(big, small); !TooLarge(err) {
		t.Errorf("TooLarge(%v) = false", err)
	}
}

// TestOpenStopsAtCap: a file that grows past its cap after the check is cut at cap+1 bytes read.
func TestOpenStopsAtCap(t *testing.T) {
	p := filepath.Join(t.TempDir(), "grows")
	if err := os.WriteFile(p, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Open(p, small)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := os.WriteFile(p, []byte(strings.Repeat("x", 1000)), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(r)
	if !TooLarge(err) {
		t.Fatalf("ReadAll of a grown file: %d bytes, %v; want the cap refusal", len(b), err)
	}
	if len(b) > int(small.Max) {
		t.Fatalf("read %d bytes past a %d-byte cap", len(b), small.Max)
	}
}

func TestWithin(t *testing.T) {
	root := t.TempDir()
	bundle := filepath.Join(root, "bundle")
	if err := os.MkdirAll(filepath.Join(bundle, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{filepath.Join(bundle, "a.json"), filepath.Join(bundle, "sub", "b.json"), filepath.Join(root, "users.json")} {
		if err := os.WriteFile(f, []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(root, "users.json"), filepath.Join(bundle, "out.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a.json", filepath.Join(bundle, "in.json")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ member, want string }{
		{"a.json", ""},
		{"sub/b.json", ""},
		{"sub/../a.json", ""},
		{"in.json", ""},
		{"", "empty member path"},
		{"/etc/passwd", "is absolute"},
		{"../users.json", "leaves the bundle directory"},
		{"../../../../dev/zero", "leaves the bundle directory"},
		{"sub/../../users.json", "leaves the bundle directory"},
		{"out.json", "outside the bundle directory"},
		{"missing.json", "cannot resolve"},
	} {
		p, err := Within(bundle, tc.member)
		if tc.want == "" {
			if err != nil || p != filepath.Join(bundle, tc.member) {
				t.Errorf("Within(%q) = %q, %v", tc.member, p, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Within(%q) = %q, %v; want %q", tc.member, p, err, tc.want)
		}
	}
}

// FuzzLocal: whatever Local accepts, joined to a directory, stays under it.
func FuzzLocal(f *testing.F) {
	for _, s := range []string{"a.json", "../x", "/etc/passwd", "a/../../b", "a/./b", "..", ".", "a\x00b", `..\x`, "sub/../a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, member string) {
		if Local(member) != nil {
			return
		}
		const dir = "/bundle/dir"
		p := filepath.Join(dir, member)
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
			t.Fatalf("Local accepted %q, which joins to %q outside %s", member, p, dir)
		}
	})
}
