package keycast

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/loadproof/loadproof/internal/textclip"

	"github.com/loadproof/loadproof/internal/atomicfile"
	"github.com/loadproof/loadproof/internal/boundedfile"
)

// UsersFile is the credentials file written by setup and read by run
// (docs/protocol-keycast.md, Users file).
type UsersFile struct {
	URL       string     `json:"url"`
	CreatedAt string     `json:"created_at"`
	Users     []TestUser `json:"users"`
}

// TestUser is one prepared user: x-only pubkey hex, email and access token.
type TestUser struct {
	Pubkey    string `json:"pubkey"`
	Email     string `json:"email"`
	UcanToken string `json:"ucan_token"`
}

// ReadUsersFile reads and checks a users file: valid JSON with a "users"
// array, each user with a 64-hex pubkey and a non-empty ucan_token. An empty
// list gives "No users found in <path>", as the Keycast tool says.
func ReadUsersFile(path string) (*UsersFile, error) {
	data, err := boundedfile.Read(path, boundedfile.Users)
	if err != nil {
		return nil, fmt.Errorf("keycast: reading users file: %w; create it with the setup command", err)
	}
	return ParseUsersFile(path, data)
}

// ParseUsersFile is ReadUsersFile on bytes already read; path is used in
// messages only.
func ParseUsersFile(path string, data []byte) (*UsersFile, error) {
	var uf UsersFile
	if err := json.Unmarshal(data, &uf); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line, col := lineCol(data, se.Offset)
			return nil, fmt.Errorf("keycast: users file %s is not valid JSON at line %d column %d: %v", path, line, col, se)
		}
		return nil, fmt.Errorf("keycast: users file %s does not have the setup format: %s", path, jsonErrText(err))
	}
	if len(uf.Users) == 0 {
		return nil, fmt.Errorf("No users found in %s", path)
	}
	for i, u := range uf.Users {
		if len(u.Pubkey) != 64 || !isHex(u.Pubkey) {
			return nil, fmt.Errorf("keycast: users file %s: user %d has pubkey %q; want 64 hex characters", path, i, textclip.String(u.Pubkey, 80))
		}
		if u.UcanToken == "" {
			return nil, fmt.Errorf("keycast: users file %s: user %d (%s) has an empty ucan_token; run setup again", path, i, u.Pubkey)
		}
	}
	return &uf, nil
}

func lineCol(data []byte, off int64) (line, col int) {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	before := data[:off]
	line = bytes.Count(before, []byte{'\n'}) + 1
	col = int(off) - bytes.LastIndexByte(before, '\n')
	return line, col
}

// WriteUsersFile writes uf as 2-space indented JSON, atomically (temporary
// file in the same directory, fsync, rename) with mode 0600, because the
// tokens are credentials.
func WriteUsersFile(path string, uf *UsersFile) error {
	data, err := json.MarshalIndent(uf, "", "  ")
	if err != nil {
		return fmt.Errorf("keycast: encoding users file: %w", err)
	}
	if err := atomicfile.Write(path, data, 0o600); err != nil {
		return fmt.Errorf("keycast: %w", err)
	}
	return nil
}

// SaveUsersFile writes uf to path (WriteUsersFile) and, when that fails, to a private file in the
// temporary directory instead: the users' tokens exist nowhere else, so a full disk or a bad path
// must not lose them. The error then says where they went (or that the second write failed too).
func SaveUsersFile(path string, uf *UsersFile) error {
	err := WriteUsersFile(path, uf)
	if err == nil {
		return nil
	}
	fallback := filepath.Join(os.TempDir(), fmt.Sprintf("loadtest-users-%d.json", time.Now().UnixNano()))
	if ferr := WriteUsersFile(fallback, uf); ferr != nil {
		return fmt.Errorf("%w; saving the %d users to %s failed too (%v): their tokens are lost", err, len(uf.Users), fallback, ferr)
	}
	return fmt.Errorf("%w; the %d users created are saved in %s instead", err, len(uf.Users), fallback)
}

// FormatTimestamp formats t as RFC 3339 UTC with nanoseconds and a Z suffix, the form upstream's
// files carry (e.g. 2025-12-10T12:34:56.123456789Z).
func FormatTimestamp(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000000000Z")
}
