package linkkeys

import (
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

var testInfo = Info{Port: 40123, Domain: "loadtest.local", Fingerprint: strings.Repeat("0a", 32), PID: 4242}

func TestWriteInfoGolden(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "loadtest-info.json")
	if err := WriteInfo(path, testInfo); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "info.golden")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run TestWriteInfoGolden -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Fatalf("info file:\n%s\nwant:\n%s", got, want)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v, %v; want 0644", st.Mode(), err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("directory holds %d entries after WriteInfo, want only the info file", len(entries))
	}
	back, err := ReadInfo(path)
	if err != nil || back != testInfo {
		t.Fatalf("ReadInfo = %+v, %v", back, err)
	}
	// Overwriting replaces the file.
	next := testInfo
	next.Port = 1
	if err := WriteInfo(path, next); err != nil {
		t.Fatal(err)
	}
	if back, err := ReadInfo(path); err != nil || back != next {
		t.Fatalf("after overwrite: %+v, %v", back, err)
	}
}

func TestWriteInfoMissingDir(t *testing.T) {
	err := WriteInfo(filepath.Join(t.TempDir(), "no", "such", "info.json"), testInfo)
	if err == nil || !strings.HasPrefix(err.Error(), "linkkeys: writing info file") {
		t.Fatalf("error = %v", err)
	}
}

func TestReadInfoMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "absent.json")
	_, err := ReadInfo(path)
	want := "reading info file " + path + ": no such file or directory (is the `server` subcommand running?)"
	if err == nil || err.Error() != want {
		t.Fatalf("error = %v\nwant    %s", err, want)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("error does not match fs.ErrNotExist")
	}
}

func TestParseInfo(t *testing.T) {
	fp := strings.Repeat("ab", 32)
	tests := []struct {
		name string
		in   string
		want string // "" means valid
	}{
		{"valid", `{"port":1,"domain":"d","fingerprint":"` + fp + `","pid":0}`, ""},
		{"extra keys ignored, any order", `{"pid":7,"x":[1],"fingerprint":"` + fp + `","domain":"d","port":65535}`, ""},
		{"missing pid", `{"port":1,"domain":"d","fingerprint":"` + fp + `"}`, `missing "pid"`},
		{"null pid", `{"port":1,"domain":"d","fingerprint":"` + fp + `","pid":null}`, `missing "pid"`},
		{"negative pid", `{"port":1,"domain":"d","fingerprint":"` + fp + `","pid":-1}`, "invalid JSON"},
		{"pid too large", `{"port":1,"domain":"d","fingerprint":"` + fp + `","pid":4294967296}`, "invalid JSON"},
		{"float pid", `{"port":1,"domain":"d","fingerprint":"` + fp + `","pid":1.5}`, "invalid JSON"},
		{"port zero", `{"port":0,"domain":"d","fingerprint":"` + fp + `","pid":1}`, `"port" is 0`},
		{"port too large", `{"port":65536,"domain":"d","fingerprint":"` + fp + `","pid":1}`, "invalid JSON"},
		{"port string", `{"port":"1","domain":"d","fingerprint":"` + fp + `","pid":1}`, "invalid JSON"},
		{"empty domain", `{"port":1,"domain":"","fingerprint":"` + fp + `","pid":1}`, `"domain" is empty`},
		{"upper-case fingerprint", `{"port":1,"domain":"d","fingerprint":"` + strings.ToUpper(fp) + `","pid":1}`, "64 lowercase hex"},
		{"short fingerprint", `{"port":1,"domain":"d","fingerprint":"abc","pid":1}`, "64 lowercase hex"},
		{"everything missing", `{}`, `missing "port"` + "\n" + `missing "domain"` + "\n" + `missing "fingerprint"` + "\n" + `missing "pid"`},
		{"not an object", `[1]`, "invalid JSON"},
		{"empty", ``, "invalid JSON"},
		{"trailing data", `{"port":1,"domain":"d","fingerprint":"` + fp + `","pid":1} {}`, "trailing data"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseInfo([]byte(tt.in))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("ParseInfo: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func FuzzParseInfo(f *testing.F) {
	b, _ := MarshalInfo(testInfo)
	f.Add(b)
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"port":0}`))
	f.Add([]byte(`{"port":1,"domain":"d","fingerprint":"` + strings.Repeat("ab", 32) + `","pid":1,"host":"198.18.0.1"}`))
	f.Add([]byte(`{"port":1,"domain":"d","fingerprint":"` + strings.Repeat("ab", 32) + `","pid":1,"host":"fe80::1%eth0"}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		info, err := ParseInfo(in)
		if err != nil {
			return
		}
		out, err := MarshalInfo(info)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseInfo(out)
		if err != nil || back != info {
			t.Fatalf("re-parse of %s: %+v, %v", out, back, err)
		}
	})
}

func TestMarshalInfoNoHTMLEscape(t *testing.T) {
	b, err := MarshalInfo(Info{Port: 1, Domain: "a&b<c>", Fingerprint: "f", PID: 2})
	if err != nil {
		t.Fatal(err)
	}
	if want := "{\n  \"port\": 1,\n  \"domain\": \"a&b<c>\",\n  \"fingerprint\": \"f\",\n  \"pid\": 2\n}"; string(b) != want {
		t.Fatalf("got %q, want %q", b, want)
	}
}

// TestInfoHost: the optional host key round-trips, is written only for one specific non-loopback
// listen address, must be an IP address, and an info file without it means 127.0.0.1.
func TestInfoHost(t *testing.T) {
	for in, want := range map[string]string{"198.18.0.1": "198.18.0.1", "127.0.0.1": "", "127.3.0.1": "", "0.0.0.0": "",
		"::": "", "::1": "", "[2001:db8::1]": "2001:db8::1", "::ffff:198.18.0.1": "198.18.0.1", "localhost": "", "": ""} {
		if got := InfoHost(in); got != want {
			t.Errorf("InfoHost(%q) = %q, want %q", in, got, want)
		}
	}
	withHost := testInfo
	withHost.Host = "198.18.0.1"
	b, err := MarshalInfo(withHost)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(string(b), `"host": "198.18.0.1"
}`) {
		t.Errorf("host is not the last key:\n%s", b)
	}
	back, err := ParseInfo(b)
	if err != nil || back != withHost || back.TargetHost() != "198.18.0.1" {
		t.Fatalf("ParseInfo = %+v, %v", back, err)
	}
	plain, _ := MarshalInfo(testInfo)
	if strings.Contains(string(plain), "host") {
		t.Errorf("an info file without host carries the key:\n%s", plain)
	}
	if back, _ := ParseInfo(plain); back.TargetHost() != "127.0.0.1" {
		t.Errorf("TargetHost of a file without host = %q, want 127.0.0.1", back.TargetHost())
	}
	bad := strings.Replace(string(b), "198.18.0.1", "server.example", 1)
	if _, err := ParseInfo([]byte(bad)); err == nil || !strings.Contains(err.Error(), `"host" "server.example" is not an IP address`) {
		t.Errorf("a host name in the info file: %v", err)
	}
}
