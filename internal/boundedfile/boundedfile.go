// Package boundedfile reads the files loadproof is given from outside (result files, evidence
// bundles, plans, users files, info files, certificates, METRICS logs) so that no file can make a
// reader hang or grow without bound: only regular files are read (a FIFO would block, /dev/zero would
// never end, a directory or socket is no file at all), symlinks are followed and the target is what is
// judged, and each kind of file has a size cap. A reader never takes more than cap+1 bytes, even from a
// file that grows while it is read. Within keeps a bundle's member paths inside the bundle.
//
// It imports nothing of ours so that every package that reads outside files can use it.
package boundedfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Kind names a kind of file and its size cap. The caps are far above what loadproof itself writes,
// so that only a file that could not be ours is refused.
type Kind struct {
	// Name is what the file is, for messages ("result file").
	Name string
	// Max is the largest accepted size in bytes.
	Max int64
}

// The kinds of outside files and their caps.
var (
	// Result: a result file of a long run with many intervals, segments and server samples is tens of
	// MiB; 512 MiB leaves room for days of intervals while staying below what a report machine holds.
	Result = Kind{Name: "result file", Max: 512 << 20}
	// Evidence: evidence.json holds phases, checks and verdicts (a few KiB each); 64 MiB is generous.
	Evidence = Kind{Name: "evidence file", Max: 64 << 20}
	// Manifest: one line per bundle file; 16 MiB covers any bundle a run writes.
	Manifest = Kind{Name: "manifest", Max: 16 << 20}
	// Plan: plans are written by hand, a few KiB; 1 MiB.
	Plan = Kind{Name: "plan", Max: 1 << 20}
	// Users: about 300 bytes a user; 256 MiB covers the largest user counts setup writes (~800,000).
	Users = Kind{Name: "users file", Max: 256 << 20}
	// Info: a LinkKeys info file is an address, a certificate and a fingerprint (about 1 KiB); 64 KiB.
	Info = Kind{Name: "info file", Max: 64 << 10}
	// Cert: a PEM bundle of CA certificates (a system bundle is ~250 KiB); 1 MiB.
	Cert = Kind{Name: "certificate file", Max: 1 << 20}
	// Key: a key file (master key, signing key) is under a KiB; 64 KiB.
	Key = Kind{Name: "key file", Max: 64 << 10}
	// MetricsLog: a server's METRICS log grows about 1 KiB a second (one line per second); 256 MiB
	// holds more than two days of it.
	MetricsLog = Kind{Name: "METRICS log", Max: 256 << 20}
)

// Error says which file was refused and why. Err, when set, is the underlying error (os.ErrNotExist).
type Error struct {
	Path string
	What string
	Err  error
}

func (e *Error) Error() string { return "boundedfile: " + e.Path + ": " + e.What }

// Unwrap returns the underlying error, so errors.Is(err, fs.ErrNotExist) holds for a missing file.
func (e *Error) Unwrap() error { return e.Err }

// TooLarge reports whether err is a refusal for size.
func TooLarge(err error) bool {
	var e *Error
	return errors.As(err, &e) && errors.Is(e.Err, errTooLarge)
}

var errTooLarge = errors.New("file too large")

// Read reads the whole regular file at path, at most kind.Max bytes; anything else is an *Error naming
// the file and what is wrong with it.
func Read(path string, kind Kind) ([]byte, error) {
	f, size, err := open(path, kind)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// The stat size is only a hint (the file may grow); the limit is what holds.
	hint := size
	if hint > kind.Max {
		hint = kind.Max
	}
	buf := make([]byte, 0, hint+1)
	b, err := readAllInto(buf, io.LimitReader(f, kind.Max+1))
	if err != nil {
		return nil, &Error{Path: path, What: "reading the " + kind.Name + ": " + err.Error(), Err: err}
	}
	if int64(len(b)) > kind.Max {
		return nil, tooLarge(path, kind)
	}
	return b, nil
}

// Open opens the regular file at path for streaming readers: the returned reader yields at most
// kind.Max bytes and then fails with an *Error (not io.EOF) if the file holds more.
func Open(path string, kind Kind) (io.ReadCloser, error) {
	f, _, err := open(path, kind)
	if err != nil {
		return nil, err
	}
	return &limited{f: f, path: path, kind: kind, left: kind.Max}, nil
}

type limited struct {
	f    *os.File
	path string
	kind Kind
	left int64
}

func (l *limited) Read(p []byte) (int, error) {
	if l.left < 0 {
		return 0, tooLarge(l.path, l.kind)
	}
	if int64(len(p)) > l.left+1 {
		p = p[:l.left+1]
	}
	n, err := l.f.Read(p)
	l.left -= int64(n)
	if l.left < 0 {
		return n + int(l.left), tooLarge(l.path, l.kind)
	}
	return n, err
}

func (l *limited) Close() error { return l.f.Close() }

func tooLarge(path string, kind Kind) error {
	return &Error{Path: path, What: fmt.Sprintf("is larger than the %s cap on %ss; this is not a file loadproof wrote", human(kind.Max), kind.Name), Err: errTooLarge}
}

// open checks path is a regular file (following symlinks) within the cap, opens it and checks the
// opened file is still a regular file (it may have been swapped between the two).
func open(path string, kind Kind) (*os.File, int64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, 0, &Error{Path: path, What: "cannot read the " + kind.Name + ": " + errText(err), Err: err}
	}
	if err := regular(path, kind, fi); err != nil {
		return nil, 0, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, &Error{Path: path, What: "cannot read the " + kind.Name + ": " + errText(err), Err: err}
	}
	fi, err = f.Stat()
	if err == nil {
		err = regular(path, kind, fi)
	}
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, fi.Size(), nil
}

func regular(path string, kind Kind, fi fs.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return &Error{Path: path, What: fmt.Sprintf("is %s, not a regular file; give the path of a %s", describe(fi.Mode()), kind.Name)}
	}
	if fi.Size() > kind.Max {
		return tooLarge(path, kind)
	}
	return nil
}

// describe names what a non-regular file is.
func describe(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeIrregular != 0:
		return "an irregular file"
	}
	return "not a plain file (" + m.Type().String() + ")"
}

func errText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

func human(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d-byte", n)
}

// readAllInto is io.ReadAll into a buffer sized from the stat hint.
func readAllInto(b []byte, r io.Reader) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return b, err
		}
	}
}

// Within returns the path of member, a path named inside the bundle directory dir (a results file
// named by evidence.json), after checking it stays inside dir: an empty, absolute or `..`-escaping
// member is refused, and so is one whose symlinks resolve outside dir. The returned path is
// dir-joined (not resolved), so messages show what the bundle names.
func Within(dir, member string) (string, error) {
	if err := Local(member); err != nil {
		return "", &Error{Path: filepath.Join(dir, member), What: err.Error()}
	}
	p := filepath.Join(dir, member)
	rdir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", &Error{Path: dir, What: "cannot resolve the bundle directory: " + errText(err), Err: err}
	}
	rp, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", &Error{Path: p, What: "cannot resolve the bundle member: " + errText(err), Err: err}
	}
	rel, err := filepath.Rel(rdir, rp)
	if err != nil || !filepath.IsLocal(rel) {
		return "", &Error{Path: p, What: fmt.Sprintf("resolves to %s, outside the bundle directory %s; a bundle names only its own files", rp, dir)}
	}
	return p, nil
}

// Local checks, without touching the file system, that member is a relative path that stays below
// the directory it is joined to: not empty, not absolute, no `..` that climbs out, no NUL. The error
// says which.
func Local(member string) error {
	switch {
	case member == "":
		return errors.New("empty member path; a bundle member is a file name inside the bundle")
	case strings.IndexByte(member, 0) >= 0:
		return errors.New("member path holds a NUL byte")
	case filepath.IsAbs(member) || strings.HasPrefix(member, "/") || strings.HasPrefix(member, `\`):
		return fmt.Errorf("member path %q is absolute; a bundle names its files relative to itself", member)
	case !filepath.IsLocal(member):
		return fmt.Errorf("member path %q leaves the bundle directory", member)
	}
	return nil
}

// OpenRegular opens path for a reader that reads a part of it from an offset (the tail of a growing
// log): only a regular file is opened, so a FIFO cannot block the reader and a device cannot feed it
// forever; the size is not capped, so the caller bounds what it reads (io.LimitReader).
func OpenRegular(path string, kind Kind) (*os.File, error) {
	k := kind
	k.Max = 1<<63 - 2
	f, _, err := open(path, k)
	return f, err
}
