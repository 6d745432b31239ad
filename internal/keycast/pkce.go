package keycast

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"github.com/loadproof/loadproof/internal/textclip"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/crypto/hkdf"
)

// PKCE methods (RFC 7636). An empty method means PKCEPlain, as in Keycast.
const (
	PKCEPlain = "plain"
	PKCES256  = "S256"
)

// PKCE errors; their text is Keycast's 400 message.
var (
	ErrPKCEVerifierRequired = errors.New("code_verifier required for PKCE flow")
	ErrPKCEMismatch         = errors.New("Invalid code_verifier: PKCE validation failed")
)

// NewPKCEVerifier returns base64url (no padding) of 32 random bytes: 43
// characters, as the load tool sends.
func NewPKCEVerifier() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		// crypto/rand.Read does not fail on supported platforms (Go 1.24+).
		panic(fmt.Sprintf("keycast: crypto/rand failed: %v", err))
	}
	return b64.EncodeToString(b[:])
}

// PKCEChallengeS256 returns base64url-nopad(SHA-256(verifier)).
func PKCEChallengeS256(verifier string) string {
	h := sha256.Sum256([]byte(verifier))
	return b64.EncodeToString(h[:])
}

// VerifyPKCE checks a code_verifier against the stored challenge. method ""
// means plain. An empty verifier gives ErrPKCEVerifierRequired, a mismatch
// ErrPKCEMismatch, an unknown method an error naming it.
func VerifyPKCE(method, challenge, verifier string) error {
	if verifier == "" {
		return ErrPKCEVerifierRequired
	}
	var computed string
	switch method {
	case "", PKCEPlain:
		computed = verifier
	case PKCES256:
		computed = PKCEChallengeS256(verifier)
	default:
		return fmt.Errorf("Unsupported code_challenge_method: %s", textclip.String(method, 40))
	}
	if subtle.ConstantTimeCompare([]byte(computed), []byte(challenge)) != 1 {
		return ErrPKCEMismatch
	}
	return nil
}

// BunkerKeyInfoPrefix is the HKDF info prefix of Keycast's bunker keys.
const BunkerKeyInfoPrefix = "keycast-bunker-nip46-v1-"

// DeriveBunkerKey derives the per-authorization bunker key: HKDF-SHA256 with
// no salt, IKM the user's 32-byte secret, info BunkerKeyInfoPrefix +
// connectionSecret, 32 bytes out; while the output is not a valid scalar the
// info gets "-retry1", "-retry2", … appended.
func DeriveBunkerKey(userSecret SecretKey, connectionSecret string) (SecretKey, error) {
	if !userSecret.Valid() {
		return SecretKey{}, ErrInvalidSecretKey
	}
	prk := hkdf.Extract(sha256.New, userSecret[:], nil)
	base := BunkerKeyInfoPrefix + connectionSecret
	for counter := 0; counter < 256; counter++ {
		info := base
		if counter > 0 {
			info = base + "-retry" + strconv.Itoa(counter)
		}
		var out SecretKey
		if _, err := io.ReadFull(hkdf.Expand(sha256.New, prk, []byte(info)), out[:]); err != nil {
			return SecretKey{}, fmt.Errorf("keycast: HKDF expand: %w", err)
		}
		if out.Valid() {
			return out, nil
		}
	}
	return SecretKey{}, errors.New("keycast: bunker key derivation produced 256 invalid scalars; this cannot happen with a working SHA-256")
}

// OriginOf returns the origin scheme://host[:port] of a redirect URI, as
// Keycast's extract_origin does: https is always allowed; http only for
// localhost, 127.0.0.1 and [::1]; any other scheme is refused. The host is
// lower-cased and a default port (443 for https, 80 for http) is dropped, as
// the WHATWG URL origin does.
func OriginOf(redirectURI string) (string, error) {
	u, err := url.Parse(redirectURI)
	if err != nil {
		return "", fmt.Errorf("Invalid redirect_uri: %v", err)
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme == "" || u.Host == "" {
		return "", fmt.Errorf("Invalid redirect_uri: %q is not an absolute URL with a host", textclip.String(redirectURI, 200))
	}
	host := strings.ToLower(u.Hostname())
	if host == "" {
		return "", fmt.Errorf("Invalid redirect_uri: %q is not an absolute URL with a host", textclip.String(redirectURI, 200))
	}
	port := u.Port()
	if port != "" {
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			return "", fmt.Errorf("Invalid redirect_uri: port %q is not a number from 0 to 65535", port)
		}
		port = strconv.FormatUint(n, 10)
	}
	switch scheme {
	case "https":
		if port == "443" {
			port = ""
		}
	case "http":
		if host != "localhost" && host != "127.0.0.1" && host != "::1" {
			return "", fmt.Errorf("Invalid redirect_uri: http is allowed only for localhost, 127.0.0.1 and [::1], not %s; use https", host)
		}
		if port == "80" {
			port = ""
		}
	default:
		return "", fmt.Errorf("Invalid redirect_uri: scheme %q is not allowed; use https (or http for localhost)", scheme)
	}
	h := host
	if strings.Contains(host, ":") {
		h = "[" + host + "]"
	}
	if port != "" {
		h = net.JoinHostPort(host, port)
	}
	return scheme + "://" + h, nil
}
