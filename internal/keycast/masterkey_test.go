package keycast

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadOrCreateMasterKey(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "master.key")
	k1, created, err := LoadOrCreateMasterKey(path)
	if err != nil || !created {
		t.Fatalf("create: %v created=%v", err, created)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", st.Mode().Perm())
	}
	content, _ := os.ReadFile(path)
	raw, err := base64.StdEncoding.DecodeString(string(content))
	if err != nil || !bytes.Equal(raw, k1[:]) {
		t.Fatalf("file content %q is not the base64 key", content)
	}
	k2, created, err := LoadOrCreateMasterKey(path)
	if err != nil || created || k2 != k1 {
		t.Fatalf("reload: %v created=%v same=%v", err, created, k2 == k1)
	}
	// A file written by hand with a newline (openssl rand -base64 32) loads.
	if err := os.WriteFile(path, append(content, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	if k3, _, err := LoadOrCreateMasterKey(path); err != nil || k3 != k1 {
		t.Fatalf("newline-terminated key: %v", err)
	}
	for name, bad := range map[string]string{
		"short":    base64.StdEncoding.EncodeToString(make([]byte, 16)),
		"not b64":  "!!!not base64!!!",
		"empty":    "",
		"too long": base64.StdEncoding.EncodeToString(make([]byte, 33)),
	} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(bad), 0o600)
		_, _, err := LoadOrCreateMasterKey(p)
		if err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: err = %v, want a refusal naming the file", name, err)
		}
		if after, _ := os.ReadFile(p); string(after) != bad {
			t.Errorf("%s: file was overwritten", name)
		}
	}
	if _, _, err := LoadOrCreateMasterKey(filepath.Join(dir, "missing", "master.key")); err == nil {
		t.Fatal("creating in a missing directory succeeded")
	}
}

func TestMasterKeySealOpen(t *testing.T) {
	k, err := GenerateMasterKey()
	if err != nil {
		t.Fatal(err)
	}
	sk := MustGenerateSecretKey()
	sealed, err := k.Seal(sk[:])
	if err != nil {
		t.Fatal(err)
	}
	if len(sealed) != 12+32+16 {
		t.Fatalf("sealed length %d, want 60", len(sealed))
	}
	again, _ := k.Seal(sk[:])
	if bytes.Equal(again, sealed) {
		t.Fatal("two seals are identical (nonce reuse)")
	}
	plain, err := k.Open(sealed)
	if err != nil || !bytes.Equal(plain, sk[:]) {
		t.Fatalf("open: %v", err)
	}
	g := k.AEAD()
	plain2, err := OpenWith(g, again)
	if err != nil || !bytes.Equal(plain2, sk[:]) {
		t.Fatalf("OpenWith: %v", err)
	}
	for i := range sealed {
		bad := bytes.Clone(sealed)
		bad[i] ^= 1
		if _, err := k.Open(bad); err == nil {
			t.Fatalf("tampered byte %d opened", i)
		}
	}
	other, _ := GenerateMasterKey()
	if _, err := other.Open(sealed); err == nil {
		t.Fatal("opened with another key")
	}
	if _, err := k.Open(sealed[:20]); err == nil {
		t.Fatal("short input opened")
	}
	if strings.Contains(k.GoString(), "0x") || k.String() != "MasterKey(redacted)" {
		t.Fatal("master key not redacted")
	}
}
