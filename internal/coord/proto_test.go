package coord

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/result"
)

func TestWireIntervalMergesExactly(t *testing.T) {
	a, b := hist.New(), hist.New()
	for i := range 3000 {
		a.Record(time.Duration(i*7%50000+1) * time.Microsecond)
		b.Record(time.Duration(i*13%900000+1) * time.Microsecond)
	}
	ivA := &result.Interval{T: 1, Secs: 1, Counts: map[string]int64{"success": 2990, "network": 10}, Latency: map[string]*hist.Histogram{"latency": a}}
	ivB := &result.Interval{T: 1, Secs: 1, Counts: map[string]int64{"success": 3000}, Causes: map[string]int64{"x": 1}, Latency: map[string]*hist.Histogram{"latency": b}}
	var direct, wire result.Interval
	direct.Add(ivA)
	direct.Add(ivB)
	ToWire(ivA).AddTo(&wire)
	ToWire(ivB).AddTo(&wire)
	if wire.Total() != direct.Total() || wire.Causes["x"] != 1 || wire.Latency["latency"].Summary() != direct.Latency["latency"].Summary() {
		t.Fatalf("wire merge %+v differs from direct merge %+v", wire.Latency["latency"].Summary(), direct.Latency["latency"].Summary())
	}
	if got := unpackBuckets([]byte{0x80}); got != nil {
		t.Errorf("a truncated varint decoded to %v", got)
	}
}

func TestSignerRejectsForgery(t *testing.T) {
	s := signer{[]byte("k")}
	m, err := s.msg("lp.r.abort", Abort{Task: -1, Reason: "x"})
	if err != nil {
		t.Fatal(err)
	}
	var a Abort
	if err := s.open(m, &a); err != nil || a.Reason != "x" {
		t.Fatalf("open: %v %+v", err, a)
	}
	m.Data = []byte(`{"task":-1,"reason":"forged"}`)
	if err := s.open(m, &a); err != errBadSignature {
		t.Errorf("forged body accepted: %v", err)
	}
	plain := nats.NewMsg("lp.r.abort")
	plain.Data = []byte(`{}`)
	if err := s.check(plain); err != errBadSignature {
		t.Errorf("unsigned message accepted: %v", err)
	}
	if err := (signer{}).check(plain); err != nil {
		t.Errorf("no secret: %v", err)
	}
}

func TestHostRules(t *testing.T) {
	r := HostRules{AllowHost: "keycast.staging.test"}
	for url, ok := range map[string]bool{
		"http://127.0.0.1:3000": true, "http://localhost:1": true, "http://[::1]:2": true,
		"https://keycast.staging.test": true, "https://other.test": false,
		"https://keycast.divine.video": false, "https://login.divine.video.": false, "not a url": false,
	} {
		if err := r.AuthorizeURL(url); (err == nil) != ok {
			t.Errorf("AuthorizeURL(%q) = %v; want ok %v", url, err, ok)
		}
	}
	if err := CheckCommand([]string{"keycast", "run", "--url", "x"}); err != nil {
		t.Error(err)
	}
	for _, args := range [][]string{{"keycast", "server"}, {"sh", "-c", "true"}, {"keycast", "run", "--", "x"}, {}} {
		if CheckCommand(args) == nil {
			t.Errorf("CheckCommand(%q) allowed", args)
		}
	}
}
