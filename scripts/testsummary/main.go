// Command testsummary reads `go test -json` on standard input and prints what a person needs from
// it: each package's result line, the whole output of every failed test, then the slowest tests and
// one closing line "N passed, N failed, N skipped". scripts/test.sh pipes each go test stage
// through it. It exits 1 when a test or package failed, so a pipeline fails even without pipefail.
//
//	go test -json ./... | go run ./scripts/testsummary -stage integration -slowest 10
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// event is one line of test2json's output (go doc test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string // build-output and build-fail events
	Test       string
	Elapsed    float64
	Output     string
}

type timing struct {
	name string
	secs float64
}

type summary struct {
	passed, failed, skipped int
	failedPkgs              []string
	slow                    []timing
	// pending holds each running test's output until it ends: printed only when it fails.
	pending map[string]*strings.Builder
	out     io.Writer
}

func main() {
	stage := flag.String("stage", "", "stage name printed before the slowest tests")
	slowest := flag.Int("slowest", 10, "how many of the slowest tests to name")
	flag.Parse()
	s := &summary{pending: map[string]*strings.Builder{}, out: os.Stdout}
	if err := s.read(os.Stdin); err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	s.print(*stage, *slowest)
	if s.failed > 0 || len(s.failedPkgs) > 0 {
		os.Exit(1)
	}
}

func (s *summary) read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			// Not test2json (a build error printed by go test itself): pass it through.
			fmt.Fprintf(s.out, "%s\n", line)
			continue
		}
		s.handle(e)
	}
	return sc.Err()
}

func (s *summary) handle(e event) {
	key := e.Package + " " + e.Test
	switch e.Action {
	case "build-output":
		fmt.Fprint(s.out, e.Output)
		return
	case "build-fail":
		s.failedPkgs = append(s.failedPkgs, e.ImportPath+" (build)")
		return
	}
	if e.Test == "" {
		switch e.Action {
		case "output":
			if o := e.Output; o != "PASS\n" && !strings.HasPrefix(o, "=== ") {
				fmt.Fprint(s.out, o)
			}
		case "fail":
			s.failedPkgs = append(s.failedPkgs, e.Package)
		}
		return
	}
	switch e.Action {
	case "run":
		s.pending[key] = &strings.Builder{}
	case "output":
		if b := s.pending[key]; b != nil {
			b.WriteString(e.Output)
		}
	case "pass", "fail", "skip":
		b := s.pending[key]
		delete(s.pending, key)
		switch e.Action {
		case "pass":
			s.passed++
		case "skip":
			s.skipped++
		case "fail":
			s.failed++
			if b != nil {
				fmt.Fprint(s.out, b.String())
			}
		}
		// Subtests are counted but only top-level tests are ranked: a parent's time holds its
		// subtests'.
		if !strings.Contains(e.Test, "/") {
			s.slow = append(s.slow, timing{e.Package + "." + e.Test, e.Elapsed})
		}
	}
}

func (s *summary) print(stage string, n int) {
	slices.SortFunc(s.slow, func(a, b timing) int { return cmp.Compare(b.secs, a.secs) })
	if len(s.slow) > n {
		s.slow = s.slow[:n]
	}
	if len(s.slow) > 0 {
		of := ""
		if stage != "" {
			of = " of the " + stage + " stage"
		}
		fmt.Fprintf(s.out, "-- the %d slowest tests%s:\n", len(s.slow), of)
		for _, t := range s.slow {
			fmt.Fprintf(s.out, "   %7.1f s  %s\n", t.secs, strings.TrimPrefix(t.name, "github.com/loadproof/loadproof/"))
		}
	}
	for _, p := range s.failedPkgs {
		fmt.Fprintf(s.out, "FAIL package %s\n", p)
	}
	fmt.Fprintf(s.out, "%d passed, %d failed, %d skipped\n", s.passed, s.failed, s.skipped)
}
