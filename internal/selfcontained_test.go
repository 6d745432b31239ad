package internal_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"github.com/loadproof/loadproof/internal/textclip"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// selfContainedForbidden are strings no file in the repository may contain: a clone has nothing
// outside the repository, so comments, docs and tests must point at docs/ instead. They are built
// from pieces so that this file does not match itself.
var selfContainedForbidden = []struct{ text, why string }{
	{"\u00a7", "section sign: cite a heading of docs/protocol-linkkeys.md or docs/protocol-keycast.md instead"},
	{".." + "/shared", "path outside the repository"},
	{"/work" + "/shared", "path outside the repository"},
	{"shared" + "/reference", "path outside the repository: the facts are in docs/protocol-*.md"},
	{"shared" + "/testvectors", "path outside the repository: vectors live in testdata/"},
	{"shared" + "/seeds", "path outside the repository"},
}

// TestSelfContained fails for every line of the repository's files that depends on files outside
// the repository (see selfContainedForbidden).
func TestSelfContained(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	files, err := repoFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("found no files under %s", root)
	}
	const maxReported = 200
	found := 0
	for _, rel := range files {
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // tracked but deleted in the working tree
			}
			t.Fatalf("reading %s: %v", rel, err)
		}
		// Raw run output is kept compressed (bench/results/*.tar.gz): its members are read as the
		// files they were.
		if strings.HasSuffix(rel, ".tar.gz") {
			members, err := untar(b)
			if err != nil {
				t.Fatalf("reading %s: %v", rel, err)
			}
			for name, mb := range members {
				found += scanLines(t, rel+":"+name, mb, found, maxReported)
			}
			continue
		}
		found += scanLines(t, rel, b, found, maxReported)
	}
	if found > maxReported {
		t.Errorf("%d occurrences in all (first %d shown)", found, maxReported)
	}
}

// scanLines reports the forbidden strings of b's lines (up to maxReported in all, found so far)
// and returns how many it found.
func scanLines(t *testing.T, name string, b []byte, found, maxReported int) int {
	t.Helper()
	n0 := found
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, len(b)+1)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		for _, f := range selfContainedForbidden {
			if !strings.Contains(line, f.text) {
				continue
			}
			found++
			if found <= maxReported {
				t.Errorf("%s:%d: %s: %s", name, n, f.why, textclip.String(strings.TrimSpace(line), 120))
			}
		}
	}
	return found - n0
}

// untar returns the regular files of a gzip-compressed tar archive by name.
func untar(b []byte) (map[string][]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		mb, err := io.ReadAll(io.LimitReader(tr, 64<<20))
		if err != nil {
			return nil, err
		}
		out[h.Name] = mb
	}
}

// repoFiles lists the repository's files relative to root: tracked and untracked-but-not-ignored
// files when git can answer, else every regular file outside .git.
func repoFiles(root string) ([]string, error) {
	if git, err := exec.LookPath("git"); err == nil {
		out, err := exec.Command(git, "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
		if err == nil {
			var files []string
			for _, f := range strings.Split(string(out), "\x00") {
				if f == "" {
					continue
				}
				if fi, err := os.Lstat(filepath.Join(root, f)); err == nil && !fi.Mode().IsRegular() {
					continue // symlinks and submodules
				}
				files = append(files, filepath.FromSlash(f))
			}
			return files, nil
		}
	}
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		files = append(files, rel)
		return nil
	})
	return files, err
}
