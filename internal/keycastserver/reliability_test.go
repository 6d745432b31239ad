package keycastserver_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/keycastserver"
)

// Regression tests for the defects of docs/reliability.md ("Keycast server").

// TestDeniedAuthorizationRedirectsOnlyToValidatedURIs: a denied approval redirects only to a
// redirect_uri that the approve path would accept (https, or http for a local host); anything
// else (javascript:, data:, plain http elsewhere, relative) is a 400 with no Location.
func TestDeniedAuthorizationRedirectsOnlyToValidatedURIs(t *testing.T) {
	_, c := startServer(t, keycastserver.Config{})
	tests := []struct {
		redirect string
		location string // "" = refused with 400
	}{
		{c.base + "/callback", c.base + "/callback?error=access_denied"},
		{"https://app.example/cb", "https://app.example/cb?error=access_denied"},
		{"https://app.example/cb?state=x#top", "https://app.example/cb?state=x&error=access_denied#top"},
		{"javascript:alert(document.cookie)", ""},
		{"JavaScript://app.example/%0aalert(1)", ""},
		{"data:text/html,<script>alert(1)</script>", ""},
		{"http://evil.example/cb", ""},
		{"//evil.example/cb", ""},
		{"/relative", ""},
		{"", ""},
	}
	for _, tt := range tests {
		req := keycast.AuthorizeRequest{Approved: false, ClientID: "loadtest", RedirectURI: tt.redirect, Scope: keycast.LoadtestScope}
		r := c.do("POST", keycast.PathAuthorize, req)
		if tt.location == "" {
			if r.status != http.StatusBadRequest || r.header.Get("Location") != "" {
				t.Errorf("denied with redirect_uri %q: %d Location %q, want 400 and no redirect", tt.redirect, r.status, r.header.Get("Location"))
			} else if !strings.Contains(string(r.body), "redirect_uri") {
				t.Errorf("denied with redirect_uri %q: body %s does not say what is wrong", tt.redirect, r.body)
			}
			continue
		}
		if r.status != http.StatusSeeOther || r.header.Get("Location") != tt.location {
			t.Errorf("denied with redirect_uri %q: %d Location %q, want 303 to %q", tt.redirect, r.status, r.header.Get("Location"), tt.location)
		}
	}
}
