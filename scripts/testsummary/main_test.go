package main

import (
	"strings"
	"testing"
)

func TestSummary(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"run","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}`,
		`{"Action":"pass","Package":"p","Test":"TestA","Elapsed":1.5}`,
		`{"Action":"run","Package":"p","Test":"TestB"}`,
		`{"Action":"output","Package":"p","Test":"TestB","Output":"    b_test.go:9: boom\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestB","Elapsed":0.2}`,
		`{"Action":"run","Package":"p","Test":"TestB/sub"}`,
		`{"Action":"skip","Package":"p","Test":"TestB/sub","Elapsed":9}`,
		`{"Action":"output","Package":"p","Output":"FAIL\tp\t1.8s\n"}`,
		`{"Action":"fail","Package":"p","Elapsed":1.8}`,
		`# p [build failed]`,
		`{"ImportPath":"q [q.test]","Action":"build-output","Output":"q/x.go:1: syntax error\n"}`,
		`{"ImportPath":"q [q.test]","Action":"build-fail"}`,
	}, "\n")
	var out strings.Builder
	s := &summary{pending: map[string]*strings.Builder{}, out: &out}
	if err := s.read(strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	s.print("unit", 1)
	got := out.String()
	for _, want := range []string{"boom\n", "FAIL\tp\t1.8s\n", "# p [build failed]\n", "the 1 slowest tests of the unit stage", "1.5 s  p.TestA", "FAIL package p", "q/x.go:1: syntax error\n", "FAIL package q [q.test] (build)", "1 passed, 1 failed, 1 skipped\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "=== RUN") || strings.Contains(got, "TestB/sub") && strings.Contains(got, "slowest") && strings.Contains(got, "9.0 s") {
		t.Errorf("passing output or a subtest's time leaked:\n%s", got)
	}
}
