package evidence

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// VerifyOptions say what Verify checks beyond the manifest.
type VerifyOptions struct {
	// Key, when set, is the public key the signer must hold (verify --key); a file without a
	// signature then fails.
	Key ed25519.PublicKey
	// Recompute recomputes a bundle's checks, phase outcomes and verdict from its phase results
	// and returns, one line each, what the evidence states differently. Package capacity owns the
	// check rules (capacity.Recompute); the command line passes it here, so this package needs no
	// harness. Nil leaves the recomputation out, and the findings say so.
	Recompute func(b *Bundle) []string
	// ReadResult, when set, reads a result file the way a report would, so a file no report can
	// read fails verification too.
	ReadResult func(path string, data []byte) error
}

// Findings is what Verify found about one bundle or result file: what held and what did not.
type Findings struct {
	// Path is the bundle directory or result file.
	Path string
	// Bundle is true for an evidence bundle, false for a result file.
	Bundle bool
	// Held lists what was checked and held, one line each.
	Held []string
	// Problems lists what does not hold, one line each; empty means the file verified.
	Problems []string
}

// OK reports whether everything checked held.
func (f *Findings) OK() bool { return len(f.Problems) == 0 }

func (f *Findings) fail(err error) {
	for _, line := range strings.Split(err.Error(), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			f.Problems = append(f.Problems, line)
		}
	}
}

// Verify checks a bundle (its directory or evidence.json) or a result file: for a bundle, every
// file against the manifest, the recomputed checks and verdict against evidence.json, and the
// manifest's signature (evidence.sig); for a result file, that it reads as a result and its
// signature (FILE.sig). A signature is checked against the key it carries, and against opts.Key
// when given. Everything found is listed; nothing stops at the first problem.
func Verify(path string, opts VerifyOptions) *Findings {
	f := &Findings{Path: path}
	fi, err := os.Stat(path)
	if err != nil {
		f.fail(fmt.Errorf("evidence: %w", err))
		return f
	}
	isBundle := fi.IsDir() || filepath.Base(path) == EvidenceFile
	if !isBundle && fi.Mode().IsRegular() && fi.Size() <= MaxEvidenceBytes {
		if b, err := readCapped(path, MaxEvidenceBytes); err == nil && IsEvidence(b) {
			isBundle = true
		}
	}
	f.Bundle = isBundle
	if isBundle {
		verifyBundle(f, path, opts)
	} else {
		verifyResult(f, path, opts)
	}
	return f
}

func verifyBundle(f *Findings, path string, opts VerifyOptions) {
	b, err := Read(path)
	if err != nil {
		f.fail(err)
		return
	}
	f.Path = b.Dir
	if _, err := os.Lstat(filepath.Join(b.Dir, ManifestFile)); err != nil {
		f.fail(fmt.Errorf("evidence: %s has no %s: its files cannot be checked", b.Dir, ManifestFile))
	} else if err := VerifyManifest(b.Dir); err != nil {
		f.fail(err)
	} else {
		f.Held = append(f.Held, "every file matches its SHA-256 in "+ManifestFile)
	}
	if opts.Recompute == nil {
		f.Held = append(f.Held, "checks and verdict: not recomputed (no recomputation given)")
	} else if diffs := opts.Recompute(b); len(diffs) > 0 {
		for _, d := range diffs {
			f.Problems = append(f.Problems, "recomputed: "+d)
		}
	} else {
		f.Held = append(f.Held, "every check, phase outcome and the verdict recompute from the phase results as recorded")
		if h := bundleCostHeld(b); h != "" {
			f.Held = append(f.Held, h)
		}
	}
	sigPath := filepath.Join(b.Dir, SignatureFile)
	manifest := filepath.Join(b.Dir, ManifestFile)
	checkSignature(f, sigPath, manifest, ManifestFile, opts.Key)
}

func verifyResult(f *Findings, path string, opts VerifyOptions) {
	if opts.ReadResult != nil {
		b, err := readCapped(path, MaxEvidenceBytes)
		if err == nil {
			err = opts.ReadResult(path, b)
		}
		if err != nil {
			f.fail(err)
		} else {
			f.Held = append(f.Held, "reads as a result file")
			if h := costHeld(b); h != "" {
				f.Held = append(f.Held, h)
			}
		}
	}
	checkSignature(f, path+SignatureSuffix, path, filepath.Base(path), opts.Key)
}

// checkSignature checks the signature file sigPath of the file at signed (named name).
func checkSignature(f *Findings, sigPath, signed, name string, key ed25519.PublicKey) {
	sb, err := readCapped(sigPath, MaxSignatureBytes)
	if errors.Is(err, os.ErrNotExist) {
		if key != nil {
			f.fail(fmt.Errorf("evidence: %s is not signed (no %s), but a key was given to check it against", signed, filepath.Base(sigPath)))
		} else {
			f.Held = append(f.Held, "signature: none ("+filepath.Base(sigPath)+" absent); nothing shows who wrote the files")
		}
		return
	}
	if err != nil {
		f.fail(fmt.Errorf("evidence: reading the signature: %w", err))
		return
	}
	sig, err := ParseSignature(sb, sigPath)
	if err != nil {
		f.fail(err)
		return
	}
	h, _, err := hashFile(signed)
	if err != nil {
		f.fail(fmt.Errorf("evidence: hashing the signed file: %w", err))
		return
	}
	if err := sig.CheckDigest(name, h, key); err != nil {
		f.fail(err)
		return
	}
	if key != nil {
		f.Held = append(f.Held, fmt.Sprintf("signature of %s valid, by the given key %s", name, sig.KeyFingerprint))
	} else {
		f.Held = append(f.Held, fmt.Sprintf("signature of %s valid for the key it carries, %s (give --key to check who signed)", name, sig.KeyFingerprint))
	}
}
