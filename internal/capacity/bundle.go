package capacity

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/loadproof/loadproof/internal/atomicfile"
)

// Manifest is manifest.json: the SHA-256 and size of every other file in the bundle, so a copy can be
// checked (VerifyBundle, or `sha256sum` by hand) before it is trusted.
type Manifest struct {
	SchemaVersion int             `json:"schema_version"`
	Algorithm     string          `json:"algorithm"`
	GeneratedAt   string          `json:"generated_at"`
	Files         []ManifestEntry `json:"files"`
}

// ManifestEntry is one file of the bundle.
type ManifestEntry struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Bytes  int64  `json:"bytes"`
}

// writeFile writes one bundle file; tests replace it to simulate a full disk.
var writeFile = atomicfile.Write

var realWriteFile = atomicfile.Write

// bundle writes files into an evidence directory and remembers them for the manifest.
type bundle struct {
	dir   string
	files []string
}

// write writes name atomically (temporary file in the same directory, fsync, rename).
func (b *bundle) write(name string, data []byte) error {
	if err := writeFile(filepath.Join(b.dir, name), data, 0o644); err != nil {
		return fmt.Errorf("capacity: failed to write evidence bundle: %w", err)
	}
	if !slices.Contains(b.files, name) {
		b.files = append(b.files, name)
	}
	return nil
}

// WriteManifest hashes files (names relative to dir) and writes dir/manifest.json.
func WriteManifest(dir string, files []string, now time.Time) error {
	m := Manifest{SchemaVersion: 1, Algorithm: "sha256", GeneratedAt: now.UTC().Format(time.RFC3339Nano), Files: []ManifestEntry{}}
	names := slices.Clone(files)
	slices.Sort(names)
	for _, name := range names {
		sum, n, err := hashFile(filepath.Join(dir, name))
		if err != nil {
			return fmt.Errorf("capacity: writing manifest: %w", err)
		}
		m.Files = append(m.Files, ManifestEntry{Path: name, SHA256: sum, Bytes: n})
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("capacity: encoding manifest: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(dir, ManifestFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("capacity: failed to write evidence bundle: %w", err)
	}
	return nil
}

func hashFile(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// VerifyBundle checks an evidence directory against its manifest: every listed file exists with the
// listed size and SHA-256, every file in the directory is listed (manifest.json aside), and the
// evidence file is among them. It reports every difference together.
func VerifyBundle(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return fmt.Errorf("capacity: reading the bundle manifest: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("capacity: %s in %s is not a manifest: %w", ManifestFile, dir, err)
	}
	if m.Algorithm != "sha256" {
		return fmt.Errorf("capacity: manifest algorithm %q is not sha256", m.Algorithm)
	}
	var problems []error
	listed := map[string]bool{}
	for _, e := range m.Files {
		if e.Path == "" || e.Path != filepath.Base(e.Path) || strings.HasPrefix(e.Path, ".") {
			problems = append(problems, fmt.Errorf("capacity: manifest lists %q, which is not a plain file name in the bundle", e.Path))
			continue
		}
		listed[e.Path] = true
		sum, n, err := hashFile(filepath.Join(dir, e.Path))
		switch {
		case err != nil:
			problems = append(problems, fmt.Errorf("capacity: bundle file %s: %w", e.Path, err))
		case n != e.Bytes:
			problems = append(problems, fmt.Errorf("capacity: bundle file %s has %d bytes; the manifest says %d", e.Path, n, e.Bytes))
		case sum != e.SHA256:
			problems = append(problems, fmt.Errorf("capacity: bundle file %s has SHA-256 %s; the manifest says %s", e.Path, sum, e.SHA256))
		}
	}
	if !listed[EvidenceFile] {
		problems = append(problems, fmt.Errorf("capacity: the manifest does not list %s", EvidenceFile))
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("capacity: reading bundle %s: %w", dir, err)
	}
	for _, de := range entries {
		if de.Name() != ManifestFile && !listed[de.Name()] {
			problems = append(problems, fmt.Errorf("capacity: bundle holds %s, which the manifest does not list", de.Name()))
		}
	}
	return errors.Join(problems...)
}
