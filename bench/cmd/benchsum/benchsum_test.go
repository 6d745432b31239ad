package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The golden files (testdata/*.want) were printed by the Python summaries these replace, on the
// same files: each summary prints what its script always printed.
func TestSummaries(t *testing.T) {
	t.Chdir("testdata")
	for _, tc := range []struct {
		name  string
		args  []string
		stdin string
	}{
		{"side-by-side", []string{"side-by-side", "side-by-side", "2"}, ""},
		{"combined-procs", []string{"combined-procs", "combined-procs", "2"}, ""},
		{"ddos-rss", []string{"ddos-rss", "ddos-rss", "1", "300", "leanold"}, ""},
		{"handshake-pinned", []string{"handshake-pinned", "handshake-pinned", "2", "old", "new"}, ""},
		{"perf-breakdown", []string{"perf-breakdown", "2371", "171800000"}, "perf-breakdown.txt"},
		{"perf-breakdown-noargs", []string{"perf-breakdown"}, "perf-breakdown.txt"},
		{"testbed-bridge", []string{"testbed-bridge", "testbed-bridge", "2"}, ""},
		{"testbed-held", []string{"testbed-held", "testbed-held", "1000"}, ""},
		{"search-knee", []string{"search-knee", "search-knee", "2"}, ""},
		{"calibration", []string{"calibration", "calibration", "2", "1", "2", "2"}, ""},
		{"million", []string{"million", "million"}, ""},
		{"keycast-tls", []string{"keycast-tls", "keycast-tls.txt"}, ""},
		{"skew", []string{"skew", "skew.json"}, ""},
		{"keycast-rpc-pinned", strings.Fields("keycast-rpc pinned 42592 11023 5426 18979 4.67 42.93 157.5 37862 19536 34474"), ""},
		{"keycast-rpc-shared", strings.Fields("keycast-rpc shared 42592 11023 5426 18979 4.67 42.93 157.5 37862 19536 37000"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdin []byte
			if tc.stdin != "" {
				var err error
				if stdin, err = os.ReadFile(tc.stdin); err != nil {
					t.Fatal(err)
				}
			}
			var out, errb bytes.Buffer
			e := &env{stdin: bytes.NewReader(stdin), stdout: &out, loadavg: filepath.Join("handshake-pinned", "loadavg")}
			if rc := run(tc.args, e, &errb); rc != 0 {
				t.Fatalf("exit %d: %s", rc, errb.String())
			}
			want, err := os.ReadFile(tc.name + ".want")
			if err != nil {
				t.Fatal(err)
			}
			if got := out.String(); got != string(want) {
				t.Errorf("benchsum %s:\n got:\n%s\nwant:\n%s", strings.Join(tc.args, " "), got, want)
			}
		})
	}
}

// A summary refuses what it cannot read with a message naming the file or argument, and usage
// errors exit 2.
func TestSummaryErrors(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "lines"), []byte("keycast-tls: transport=plain rps=x\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "bad.json"), []byte("{"), 0o644)
	// A real combined result, and a real result of another command where a combined one belongs.
	for dst, src := range map[string]string{"split-1.json": "combined-procs/split-1.json", "shared-1.json": "side-by-side/hs-new-1.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", src))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, dst), b, 0o644)
	}
	for _, tc := range []struct {
		args []string
		rc   int
		msg  string
	}{
		{nil, 2, "usage"},
		{[]string{"nope"}, 2, `unknown summary "nope"`},
		{[]string{"side-by-side", dir}, 2, "usage: benchsum side-by-side OUT ROUNDS"},
		{[]string{"side-by-side", dir, "two"}, 2, `ROUNDS "two" is not a count`},
		{[]string{"side-by-side", dir, "1"}, 1, "hs-old-1.json: cannot read the result file: no such file"},
		{[]string{"combined-procs", dir, "1"}, 1, "shared-1.json has no combined section: not a combined result"},
		{[]string{"skew", filepath.Join(dir, "bad.json")}, 1, "bad.json: coord: reading a coordination manifest: unexpected end of JSON input"},
		{[]string{"keycast-tls", filepath.Join(dir, "lines")}, 1, "lines:1: "},
		{[]string{"keycast-rpc", "pinned", "1", "2"}, 2, "usage: benchsum keycast-rpc"},
		{[]string{"perf-breakdown", "x", "1"}, 2, `HANDSHAKES "x" is not a number`},
	} {
		var out, errb bytes.Buffer
		rc := run(tc.args, &env{stdin: strings.NewReader(""), stdout: &out}, &errb)
		if rc != tc.rc || !strings.Contains(errb.String(), tc.msg) {
			t.Errorf("benchsum %q: exit %d, %q; want exit %d and %q", tc.args, rc, errb.String(), tc.rc, tc.msg)
		}
	}
}

// No bench script runs Python (or another interpreter's inline program): summaries live here,
// with tests; one-field reads use jq, arithmetic awk.
func TestBenchScriptsHaveNoPython(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "*"))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, ".py") {
			t.Errorf("%s: a Python file under bench/ (write it as a benchsum summary)", f)
			continue
		}
		if !strings.HasSuffix(f, ".sh") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for i, l := range strings.Split(string(b), "\n") {
			for _, lang := range []string{"python", "perl", "ruby", "node -e"} {
				if strings.Contains(strings.ToLower(l), lang) {
					t.Errorf("%s:%d runs or names %s: %s", f, i+1, lang, strings.TrimSpace(l))
				}
			}
		}
	}
	if checked < 10 {
		t.Fatalf("found %d bench scripts under %s; the test looks in the wrong place", checked, filepath.Join("..", ".."))
	}
}

// FuzzPerfBreakdown: any perf script output is read without a panic.
func FuzzPerfBreakdown(f *testing.F) {
	f.Add("swapper 0 1000\n\tffffffff81000000 __x64_sys_read+0x1\n\t4a0000 crypto/ecdh.x25519+0x2\n\n", "10", "100000")
	f.Add("comm 1 x\n\t1 a\n\n\n", "0", "0")
	if b, err := os.ReadFile(filepath.Join("testdata", "perf-breakdown.txt")); err == nil {
		f.Add(string(b[:min(len(b), 4000)]), "5", "1e6")
	}
	f.Fuzz(func(t *testing.T, in, hs, cpu string) {
		var out, errb bytes.Buffer
		run([]string{"perf-breakdown", hs, cpu}, &env{stdin: strings.NewReader(in), stdout: &out}, &errb)
	})
}

// FuzzKeycastTLS: any lines file is summarised or refused with a message, never a panic.
func FuzzKeycastTLS(f *testing.F) {
	f.Add("keycast-tls: transport=plain requests=10 ok=10 rps=5 server_cpu_us_per_req=1.5\nkeycast-tls: transport=tls requests=10 ok=10 rps=4 server_cpu_us_per_req=2\n")
	f.Add("transport=tls rps=0 server_cpu_us_per_req=0\n")
	f.Fuzz(func(t *testing.T, in string) {
		p := filepath.Join(t.TempDir(), "lines")
		if err := os.WriteFile(p, []byte(in), 0o644); err != nil {
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		if rc := run([]string{"keycast-tls", p}, &env{stdout: &out}, &errb); rc != 0 && errb.Len() == 0 {
			t.Fatalf("exit %d with no message", rc)
		}
	})
}

// A summary reads loadproof's files through the one reader of each format, so a file of another
// kind where a result should be is refused with a message saying what it is.
func TestSummaryRefusesAFileOfAnotherKind(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join("testdata", "search-knee", "search1.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hs-old-1.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	rc := run([]string{"side-by-side", dir, "1"}, &env{stdout: &out}, &errb)
	if want := "hs-old-1.json is a search, not a LinkKeys client result"; rc != 1 || !strings.Contains(errb.String(), want) {
		t.Errorf("exit %d, %q; want exit 1 and %q", rc, errb.String(), want)
	}
}
