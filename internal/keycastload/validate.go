package keycastload

import (
	"errors"
	"fmt"
	"github.com/loadproof/loadproof/internal/textclip"
	"strconv"

	"github.com/loadproof/loadproof/internal/httpwire"
	"github.com/loadproof/loadproof/internal/keycast"
)

// MaxTokenBytes bounds an access token. A Keycast UCAN is well under 1 KiB; 16 KiB leaves room for
// any later token while staying far below the 64 KiB header limits of common servers and proxies.
const MaxTokenBytes = 16 << 10

// maxUserProblems is how many users' problems CheckUsers spells out before counting the rest.
const maxUserProblems = 10

// The fast client writes every request head from bytes taken from the users file and the flags
// (Authorization: Bearer {ucan_token}; Host from --url), without net/http's header checks
// (docs/reliability.md). A CR or LF in those bytes would end the header line early and let the file
// add headers or whole requests, so everything is checked once, before the first connection: tokens
// here, the URL in parseTarget, cookies in parseSetCookie.

// CheckToken checks an access token for the Authorization header: non-empty, at most MaxTokenBytes,
// and visible ASCII only (0x21–0x7E: RFC 6750's b64token alphabet is a subset, and anything else
// — a space, a control byte, a line break, a non-ASCII byte — cannot be sent in a Bearer
// credential). The error names the first offending byte and its offset.
func CheckToken(tok string) error {
	if tok == "" {
		return errors.New("is empty")
	}
	if len(tok) > MaxTokenBytes {
		return fmt.Errorf("is %d bytes, longer than the %d a header value may carry here", len(tok), MaxTokenBytes)
	}
	for i := 0; i < len(tok); i++ {
		if c := tok[i]; c < 0x21 || c > 0x7e {
			return fmt.Errorf("contains %s at byte %d", describeByte(c), i)
		}
	}
	return nil
}

// describeByte names a byte that may not appear in a header value.
func describeByte(c byte) string {
	switch {
	case c == '\r':
		return "a carriage return (CR)"
	case c == '\n':
		return "a line feed (LF)"
	case c == ' ':
		return "a space"
	case c == '\t':
		return "a tab"
	case c < 0x20 || c == 0x7f:
		return fmt.Sprintf("the control byte %#02x", c)
	case c >= 0x80:
		return fmt.Sprintf("the non-ASCII byte %#02x", c)
	}
	return strconv.QuoteRune(rune(c))
}

// UserError is one unusable user of a users file.
type UserError struct {
	File  string // the users file, for messages ("" when the users came from elsewhere)
	Index int    // the user's 0-based position in users[]
	Field string // "ucan_token" or "pubkey"
	Err   error  // what is wrong with the field
}

func (e *UserError) Error() string {
	where := "users"
	if e.File != "" {
		where = "users file " + e.File
	}
	return fmt.Sprintf("keycastload: %s: user %d (%s): %v", where, e.Index, e.Field, e.Err)
}

func (e *UserError) Unwrap() error { return e.Err }

// CheckUsers checks every user before a run sends anything: each ucan_token must pass CheckToken
// (it goes into the Authorization header) and each pubkey must be 64 hex characters (it goes into
// sign_event's JSON body). All problems are reported together, the first maxUserProblems spelled
// out, each naming the user's index and field; file names the users file in the messages.
func CheckUsers(users []keycast.TestUser, file string) error {
	var errs []error
	bad := 0
	note := func(e *UserError) {
		bad++
		if bad <= maxUserProblems {
			errs = append(errs, e)
		}
	}
	for i := range users {
		tok, pub := users[i].UcanToken, users[i].Pubkey
		if err := CheckToken(tok); err != nil {
			note(&UserError{File: file, Index: i, Field: "ucan_token", Err: err})
		}
		if !isHex64(pub) {
			note(&UserError{File: file, Index: i, Field: "pubkey", Err: fmt.Errorf("is %q; want 64 hex characters", textclip.Bytes([]byte(pub), 80))})
		}
	}
	if bad == 0 {
		return nil
	}
	if bad > maxUserProblems {
		errs = append(errs, fmt.Errorf("keycastload: … and %d more problems", bad-maxUserProblems))
	}
	errs = append(errs, errors.New("keycastload: nothing was sent; fix the users file or create a new one with setup"))
	return errors.Join(errs...)
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// checkHostBytes refuses a URL host that cannot go into a Host header as is: empty, or holding a
// space, a control byte or a non-ASCII byte (write an internationalised name in its punycode form).
func checkHostBytes(host string) error {
	if host == "" {
		return errors.New("is empty")
	}
	for i := 0; i < len(host); i++ {
		if c := host[i]; c < 0x21 || c > 0x7e {
			return fmt.Errorf("%q contains %s at byte %d; write an internationalised name in its punycode (xn--) form", host, describeByte(c), i)
		}
	}
	return nil
}

// isToken reports whether s is an RFC 9110 token (a header or cookie name).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !httpwire.IsTokenChar(s[i]) {
			return false
		}
	}
	return true
}
