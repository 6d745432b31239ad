package capacity

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/loadproof/loadproof/internal/atomicfile"
	"github.com/loadproof/loadproof/internal/evidence"
)

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

// VerifyBundle checks an evidence directory against its manifest (evidence.VerifyManifest): every
// listed file exists with the listed size and SHA-256, every file is listed, and the evidence file
// is among them. `loadproof verify` checks more (the recomputed verdict, the signature).
func VerifyBundle(dir string) error { return evidence.VerifyManifest(dir) }
