package linkkeys

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/loadproof/loadproof/internal/boundedfile"
)

// Info is the load-test server's info file: where it listens and which
// fingerprint to pin. Clients connect to Host:Port, 127.0.0.1:Port when Host is empty (the seed's
// file has no host).
type Info struct {
	Port        uint16 `json:"port"`
	Domain      string `json:"domain"`
	Fingerprint string `json:"fingerprint"`
	PID         uint32 `json:"pid"`
	// MetricsAddr (loadproof addition, omitted when empty) is the host:port of the server's
	// Prometheus endpoint, so clients can read the server's accounting without being told where.
	// Upstream clients ignore the extra key.
	MetricsAddr string `json:"metrics_addr,omitempty"`
	// Host (loadproof addition, omitted when empty) is the address the server listens on when it
	// listens on one specific non-loopback address (see InfoHost), so a client on another machine
	// reaches it from the file alone. Empty means 127.0.0.1, as in the seed.
	Host string `json:"host,omitempty"`
}

// InfoHost returns the info file's host for a server listening on listenHost: the address itself
// when it is one specific non-loopback IP address, else "" (a loopback or unspecified listener is
// reached at 127.0.0.1, which the seed's file already means).
func InfoHost(listenHost string) string {
	a, err := netip.ParseAddr(strings.Trim(listenHost, "[]"))
	if err != nil || a.IsLoopback() || a.IsUnspecified() || a.Zone() != "" {
		return ""
	}
	return a.Unmap().String()
}

// TargetHost is the host a client dials for info: Host, or 127.0.0.1 when the file has none.
func (info Info) TargetHost() string {
	if info.Host == "" {
		return "127.0.0.1"
	}
	return info.Host
}

// MarshalInfo returns the file form of info: two-space indented JSON with the
// keys port, domain, fingerprint, pid in that order and no trailing newline,
// byte for byte what the upstream server writes (plus metrics_addr and host last, when set).
func MarshalInfo(info Info) ([]byte, error) {
	// Like serde_json, and unlike json.Marshal's default, leave <, > and &
	// unescaped.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(info); err != nil {
		return nil, fmt.Errorf("linkkeys: encoding info file: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// WriteInfo writes info to path atomically: a temporary file in the same
// directory is written, synced, given mode 0644 and renamed over path, so a
// client polling the path never sees a partial file.
func WriteInfo(path string, info Info) (err error) {
	b, err := MarshalInfo(info)
	if err != nil {
		return err
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("linkkeys: writing info file %s: %w (does the directory exist and is it writable?)", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	if _, err = f.Write(b); err == nil {
		err = f.Chmod(0o644)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("linkkeys: writing info file %s: %w", path, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("linkkeys: writing info file %s: %w", path, err)
	}
	// Make the rename itself durable; failure here does not undo the write.
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// infoReadError keeps the upstream client's wording for an unreadable file
// while still unwrapping to the underlying error (errors.Is(err, fs.ErrNotExist)).
type infoReadError struct {
	path string
	err  error
}

func (e *infoReadError) Error() string {
	cause := e.err
	var pe *fs.PathError
	if errors.As(cause, &pe) {
		cause = pe.Err
	}
	return fmt.Sprintf("reading info file %s: %v (is the `server` subcommand running?)", e.path, cause)
}

func (e *infoReadError) Unwrap() error { return e.err }

// ReadInfo reads and validates an info file. Like the upstream client it
// requires all four keys (a null counts as missing) and ignores extra keys;
// it also requires port 1..65535, a non-empty domain and a fingerprint of 64
// lowercase hex characters.
func ReadInfo(path string) (Info, error) {
	b, err := boundedfile.Read(path, boundedfile.Info)
	if err != nil {
		return Info{}, &infoReadError{path: path, err: err}
	}
	info, err := ParseInfo(b)
	if err != nil {
		return Info{}, fmt.Errorf("linkkeys: parsing info file %s: %w", path, err)
	}
	return info, nil
}

// ParseInfo validates the JSON form of an info file; see ReadInfo.
func ParseInfo(b []byte) (Info, error) {
	var raw struct {
		Port        *uint16 `json:"port"`
		Domain      *string `json:"domain"`
		Fingerprint *string `json:"fingerprint"`
		PID         *uint32 `json:"pid"`
		MetricsAddr string  `json:"metrics_addr"`
		Host        string  `json:"host"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&raw); err != nil {
		return Info{}, fmt.Errorf("invalid JSON: %w", err)
	}
	if dec.More() {
		return Info{}, errors.New("trailing data after the JSON object")
	}
	var errs []error
	if raw.Port == nil {
		errs = append(errs, errors.New(`missing "port"`))
	} else if *raw.Port == 0 {
		errs = append(errs, errors.New(`"port" is 0, want 1..65535`))
	}
	if raw.Domain == nil {
		errs = append(errs, errors.New(`missing "domain"`))
	} else if *raw.Domain == "" {
		errs = append(errs, errors.New(`"domain" is empty`))
	}
	if raw.Fingerprint == nil {
		errs = append(errs, errors.New(`missing "fingerprint"`))
	} else if !isLowerHex64(*raw.Fingerprint) {
		errs = append(errs, fmt.Errorf(`"fingerprint" %q is not 64 lowercase hex characters`, *raw.Fingerprint))
	}
	if raw.PID == nil {
		errs = append(errs, errors.New(`missing "pid"`))
	}
	if raw.Host != "" {
		if a, err := netip.ParseAddr(raw.Host); err != nil || a.Zone() != "" {
			errs = append(errs, fmt.Errorf(`"host" %q is not an IP address`, raw.Host))
		}
	}
	if len(errs) > 0 {
		return Info{}, errors.Join(errs...)
	}
	return Info{Port: *raw.Port, Domain: *raw.Domain, Fingerprint: *raw.Fingerprint, PID: *raw.PID, MetricsAddr: raw.MetricsAddr, Host: raw.Host}, nil
}

func isLowerHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
