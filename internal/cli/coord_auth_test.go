package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loadproof/loadproof/internal/coord"
)

// TestFailClosedAndSecretsOffTheTerminal (finding 6): on an external NATS a coordinator or worker
// without a secret refuses to start; --insecure-unsigned runs with a loud warning recorded in the
// manifest; the --listen hint names the token and secret files, never their contents.
func TestFailClosedAndSecretsOffTheTerminal(t *testing.T) {
	url, token := externalNATS(t)
	dir := t.TempDir()
	client := []string{"--", "keycast", "run", "--url", "http://127.0.0.1:1", "-d", "1"}
	code, errs := umbrella(context.Background(), t, append([]string{"coordinate", "--workers", "1", "--nats", url, "--nats-token", token, "--spawn=false",
		"--join-timeout", "200ms", "--manifest", filepath.Join(dir, "a.json")}, client...)...)
	if code != ExitCouldNotRun || !strings.Contains(errs, "--insecure-unsigned") {
		t.Errorf("coordinator without a secret: exit %d\n%s", code, errs)
	}
	if !strings.Contains(errs, "a secret was given on the command line") || (token != "" && strings.Contains(errs, token)) {
		t.Errorf("--nats-token on the command line: no warning, or the token printed:\n%s", errs)
	}
	code, errs = umbrella(context.Background(), t, "worker", "--nats", url, "--nats-token", token, "--join-timeout", "200ms")
	if code != ExitCouldNotRun || !strings.Contains(errs, "--insecure-unsigned") {
		t.Errorf("worker without a secret: exit %d\n%s", code, errs)
	}
	man := filepath.Join(dir, "b.json")
	code, errs = umbrella(context.Background(), t, append([]string{"coordinate", "--workers", "1", "--nats", url, "--nats-token", token, "--spawn=false",
		"--insecure-unsigned", "--join-timeout", "200ms", "--manifest", man}, client...)...)
	if code != ExitCouldNotRun || !strings.Contains(errs, "INSECURE") || strings.Count(errs, "did not join within") != 1 {
		t.Errorf("--insecure-unsigned: exit %d; want 3, one INSECURE warning and the join error once:\n%s", code, errs)
	}
	var m coord.Manifest
	if b, err := os.ReadFile(man); err != nil || json.Unmarshal(b, &m) != nil || !m.InsecureUnsigned || m.Refused == nil {
		t.Errorf("manifest: insecure_unsigned %v, refused %v (%v)", m.InsecureUnsigned, m.Refused, err)
	}
	listen := filepath.Join(dir, "c.json")
	code, errs = umbrella(context.Background(), t, append([]string{"coordinate", "--workers", "1", "--listen", "127.0.0.1:0", "--join-timeout", "200ms",
		"--manifest", listen}, client...)...)
	tok, err1 := os.ReadFile(listen + ".nats-token")
	sec, err2 := os.ReadFile(listen + ".secret")
	if code != ExitCouldNotRun || err1 != nil || err2 != nil {
		t.Fatalf("--listen: exit %d, %v, %v\n%s", code, err1, err2, errs)
	}
	for _, v := range [][]byte{tok, sec} {
		if s := strings.TrimSpace(string(v)); len(s) < 32 || strings.Contains(errs, s) {
			t.Errorf("a secret of %d characters is printed:\n%s", len(s), errs)
		}
	}
	if fi, err := os.Stat(listen + ".secret"); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("secret file mode %v (%v)", fi.Mode(), err)
	}
	if !strings.Contains(errs, "--secret-file") {
		t.Errorf("the hint does not say how workers read the secret:\n%s", errs)
	}
}
