package linkkeysload

import (
	"context"
	"os"
	"testing"
	"time"
)

func TestTmpProfile(t *testing.T) {
	p := os.Getenv("LKPROF_INFO")
	if p == "" {
		t.Skip()
	}
	target, _, err := LoadTarget(p)
	if err != nil {
		t.Fatal(err)
	}
	res, err := HandshakeBench(context.Background(), HandshakeConfig{Target: target, DurationSecs: 5, Concurrency: 64, AttemptTimeout: 10 * time.Second,
		Sources: SourceAddrs{Base: mustIP("127.0.2.0"), Count: 32}}, Run{Stdout: os.Stdout})
	t.Log(res.Handshakes.Completed, err)
}
