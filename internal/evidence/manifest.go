package evidence

import (
	"crypto/ed25519"
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

// The fixed file names of a bundle.
const (
	// EvidenceFile is the verdict, plan and phases.
	EvidenceFile = "evidence.json"
	// ManifestFile lists every other file with its SHA-256.
	ManifestFile = "manifest.json"
	// SignatureFile is the detached Ed25519 signature of the manifest (written with --sign-key).
	SignatureFile = "evidence.sig"
)

// Caps on what a bundle reader takes in, so a hostile bundle costs bounded memory.
const (
	// MaxManifestBytes caps manifest.json.
	MaxManifestBytes = 4 << 20
	// MaxManifestEntries caps the files a manifest may list.
	MaxManifestEntries = 10_000
)

// Manifest is manifest.json: the SHA-256 and size of every other file in the bundle, so a copy can be
// checked (VerifyManifest, or `sha256sum` by hand) before it is trusted.
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

// WriteManifest hashes files (names relative to dir) and writes dir/manifest.json.
func WriteManifest(dir string, files []string, now time.Time) error {
	m := Manifest{SchemaVersion: 1, Algorithm: "sha256", GeneratedAt: now.UTC().Format(time.RFC3339Nano), Files: []ManifestEntry{}}
	names := slices.Clone(files)
	slices.Sort(names)
	for _, name := range names {
		sum, n, err := hashFile(filepath.Join(dir, name))
		if err != nil {
			return fmt.Errorf("evidence: writing manifest: %w", err)
		}
		m.Files = append(m.Files, ManifestEntry{Path: name, SHA256: sum, Bytes: n})
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("evidence: encoding manifest: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(dir, ManifestFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("evidence: failed to write evidence bundle: %w", err)
	}
	return nil
}

// Seal finishes a bundle whose member files (evidence.json among them) are written: it writes the
// manifest of files and, when priv is set, the manifest's detached signature (evidence.sig).
func Seal(dir string, files []string, now time.Time, priv ed25519.PrivateKey) error {
	if err := WriteManifest(dir, files, now); err != nil {
		return err
	}
	if priv == nil {
		return nil
	}
	return SignBundle(dir, priv)
}

// hashFile hashes a regular file (never a device or a FIFO, which could stream forever or block).
func hashFile(path string) (string, int64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", 0, err
	}
	if !fi.Mode().IsRegular() {
		return "", 0, fmt.Errorf("%s is not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(f, fi.Size()+1))
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// ParseManifest decodes manifest.json bytes, refusing anything that is not a sha256 manifest of
// plain member names.
func ParseManifest(b []byte) (*Manifest, error) {
	if len(b) > MaxManifestBytes {
		return nil, fmt.Errorf("evidence: %s is %d bytes, over the %d-byte cap", ManifestFile, len(b), MaxManifestBytes)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("evidence: %s is not a manifest: %w", ManifestFile, err)
	}
	if m.Algorithm != "sha256" {
		return nil, fmt.Errorf("evidence: manifest algorithm %q is not sha256", m.Algorithm)
	}
	if len(m.Files) > MaxManifestEntries {
		return nil, fmt.Errorf("evidence: manifest lists %d files, over the cap of %d", len(m.Files), MaxManifestEntries)
	}
	return &m, nil
}

// ValidMemberName reports whether name is a plain file name inside a bundle (no directory part,
// not hidden, not "." or "..").
func ValidMemberName(name string) bool {
	return name != "" && name == filepath.Base(name) && !strings.HasPrefix(name, ".") && !strings.ContainsAny(name, `/\`)
}

// VerifyManifest checks an evidence directory against its manifest: every listed file exists with the
// listed size and SHA-256, every file in the directory is listed (the manifest and its signature
// aside), and the evidence file is among them. It reports every difference together.
func VerifyManifest(dir string) error { return VerifyManifestOf(dir, EvidenceFile) }

// VerifyManifestOf is VerifyManifest for a bundle whose record is another file than evidence.json
// (a search bundle's search.json): the manifest must list record.
func VerifyManifestOf(dir, record string) error {
	b, err := readCapped(filepath.Join(dir, ManifestFile), MaxManifestBytes)
	if err != nil {
		return fmt.Errorf("evidence: reading the bundle manifest: %w", err)
	}
	m, err := ParseManifest(b)
	if err != nil {
		return fmt.Errorf("%w (in %s)", err, dir)
	}
	var problems []error
	listed := map[string]bool{}
	for _, e := range m.Files {
		if !ValidMemberName(e.Path) {
			problems = append(problems, fmt.Errorf("evidence: manifest lists %q, which is not a plain file name in the bundle", e.Path))
			continue
		}
		listed[e.Path] = true
		sum, n, err := hashFile(filepath.Join(dir, e.Path))
		switch {
		case err != nil:
			problems = append(problems, fmt.Errorf("evidence: bundle file %s: %w", e.Path, err))
		case n != e.Bytes:
			problems = append(problems, fmt.Errorf("evidence: bundle file %s has %d bytes; the manifest says %d", e.Path, n, e.Bytes))
		case sum != e.SHA256:
			problems = append(problems, fmt.Errorf("evidence: bundle file %s has SHA-256 %s; the manifest says %s", e.Path, sum, e.SHA256))
		}
	}
	if !listed[record] {
		problems = append(problems, fmt.Errorf("evidence: the manifest does not list %s", record))
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("evidence: reading bundle %s: %w", dir, err)
	}
	for _, de := range entries {
		if n := de.Name(); n != ManifestFile && n != SignatureFile && !listed[n] {
			problems = append(problems, fmt.Errorf("evidence: bundle holds %s, which the manifest does not list", n))
		}
	}
	return errors.Join(problems...)
}

// readCapped reads a regular file of at most limit bytes, naming the file and the cap otherwise.
func readCapped(path string, limit int64) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("%s is %d bytes, over the %d-byte cap", path, fi.Size(), limit)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s grew past the %d-byte cap while read", path, limit)
	}
	return b, nil
}
