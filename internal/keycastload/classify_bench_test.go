package keycastload

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/keycast"
)

// The client half of the JSON A/B (docs/benchmarks.md, "Hand-written JSON scanning against
// encoding/json"): judging the reference server's real response bodies by the single pass and by
// encoding/json.
//
//	go test -run '^$' -bench ClassifyBody -benchmem ./internal/keycastload/
//	GOEXPERIMENT=jsonv2 go test -run '^$' -bench ClassifyBody -benchmem ./internal/keycastload/   # adds encoding/json/v2

// responseBodies are bodies as the reference server writes them (the same keycast functions).
func responseBodies(tb testing.TB) (names []string, bodies map[string][]byte) {
	s := keycast.NewSigner(keycast.MustGenerateSecretKey())
	peer := keycast.NewSigner(keycast.MustGenerateSecretKey())
	gpk := append(append([]byte(`{"result":`), keycast.AppendJSONString(nil, s.Public().Hex())...), '}')
	ev, err := keycast.SignEvent(s, keycast.UnsignedEvent{PubKey: s.Public().Hex(), CreatedAt: time.Now().Unix(), Kind: 1,
		Tags: [][]string{}, Content: keycast.SignEventContentPrefix + "1700000000"})
	if err != nil {
		tb.Fatal(err)
	}
	se := append(ev.AppendJSON([]byte(`{"result":`)), '}')
	ck, err := keycast.NIP44ConversationKey(s.SecretKey(), peer.Public())
	if err != nil {
		tb.Fatal(err)
	}
	ct, err := keycast.NIP44Encrypt(keycast.NIP44TestPlaintext, ck, nil)
	if err != nil {
		tb.Fatal(err)
	}
	n44 := append(append([]byte(`{"result":`), keycast.AppendJSONString(nil, ct)...), '}')
	return []string{"get_public_key", "sign_event", "nip44_encrypt", "503_admission_rejected"}, map[string][]byte{
		"get_public_key": gpk, "sign_event": se, "nip44_encrypt": n44,
		"503_admission_rejected": keycast.AppendErrorJSON(nil, "server at capacity, retry shortly", "admission_rejected"),
	}
}

var bodyJudges = []struct {
	name string
	fn   func([]byte) bodyInfo
}{{"single_pass", scanBody}, {"encoding_json", scanBodyJSON}}

func TestBodyJudgesAgreeOnTheRealBodies(t *testing.T) {
	names, bodies := responseBodies(t)
	for _, name := range names {
		want := scanBodyJSON(bodies[name])
		if !json.Valid(bodies[name]) || !want.object {
			t.Fatalf("%s: %s is not a JSON object", name, bodies[name])
		}
		for _, j := range append(bodyJudges, extraJudges...) {
			if got := j.fn(bodies[name]); !sameInfo(got, want) {
				t.Fatalf("%s: %s judges %+v, encoding/json %+v", name, j.name, got, want)
			}
		}
	}
}

func BenchmarkClassifyBody(b *testing.B) {
	names, bodies := responseBodies(b)
	for _, name := range names {
		body := bodies[name]
		for _, j := range append(bodyJudges, extraJudges...) {
			b.Run(name+"/"+j.name, func(b *testing.B) {
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				cpu0 := processCPU()
				for b.Loop() {
					if !j.fn(body).object {
						b.Fatal("not an object")
					}
				}
				b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}
