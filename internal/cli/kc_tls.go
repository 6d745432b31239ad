package cli

import (
	"net/http"
	"strings"

	"github.com/spf13/pflag"

	"github.com/loadproof/loadproof/internal/keycastload"
)

// addTLSFlags adds --ca-cert and --insecure-skip-verify, for every Keycast command that talks to the
// target (setup, run, capacity, profile).
func addTLSFlags(f *pflag.FlagSet, o *keycastload.TLSOptions) {
	f.StringVar(&o.CACertFile, "ca-cert", "", "PEM file of CA certificates to trust for an https target, besides the system roots (a private CA)")
	f.BoolVar(&o.InsecureSkipVerify, "insecure-skip-verify", false, "accept any certificate from an https target (refused for the production Keycast hosts)")
}

// checkTLSFlags refuses contradictory or unusable TLS flags, and --insecure-skip-verify for a
// production host, before anything runs (exit 2).
func checkTLSFlags(cmd, url string, o keycastload.TLSOptions) error {
	if err := o.Check(url); err != nil {
		return usageError("%s: %s", cmd, strings.TrimPrefix(err.Error(), "keycastload: "))
	}
	return nil
}

// tlsHTTPClient is an http.Client for rawURL with the TLS options (profile's health and pprof
// fetches).
func tlsHTTPClient(o keycastload.TLSOptions, rawURL string, c *http.Client) (*http.Client, error) {
	tc, err := o.ClientConfig(rawURL)
	if err != nil || tc == nil {
		return c, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tc.Clone()
	c.Transport = tr
	return c, nil
}
