package keycastserver

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/keycast"
)

// The A/B behind jsonfast.go (docs/benchmarks.md, "Hand-written JSON scanning against
// encoding/json"): the server's decoding of the load tool's real request bodies, by the
// single-pass decoders and by the library.
//
//	go test -run '^$' -bench DecodeRPC -benchmem ./internal/keycastserver/
//	GOEXPERIMENT=jsonv2 go test -run '^$' -bench DecodeRPC -benchmem ./internal/keycastserver/   # adds encoding/json/v2

// rpcBodies are the bodies `keycast-loadtest run` sends, for a signer with public key pub.
func rpcBodies() (pub string, names []string, bodies map[string][]byte) {
	s := keycast.NewSigner(keycast.MustGenerateSecretKey())
	pub = s.Public().Hex()
	recipient := keycast.NewSigner(keycast.MustGenerateSecretKey()).Public().Hex()
	gpk, _ := keycast.AppendRPCBody(nil, keycast.MethodGetPublicKey, "", 0, "")
	se, _ := keycast.AppendRPCBody(nil, keycast.MethodSignEvent, pub, time.Now().Unix(), "")
	n44, _ := keycast.AppendRPCBody(nil, keycast.MethodNIP44Encrypt, pub, 0, recipient)
	return pub, []string{"get_public_key", "sign_event", "nip44_encrypt"},
		map[string][]byte{"get_public_key": gpk, "sign_event": se, "nip44_encrypt": n44}
}

// decodedCall is what the server needs from a body before it does the work.
type decodedCall struct {
	method     string
	ev         keycast.UnsignedEvent
	peer, text string
}

// decodeFast is the server's path (parseRPC without its byte-for-byte get_public_key shortcut,
// parseEventFor, stringParam): the single-pass decoders.
func decodeFast(b []byte, pub string) (decodedCall, bool) {
	c, ok := fastRPC(b)
	if !ok {
		return decodedCall{}, false
	}
	d := decodedCall{method: c.method}
	switch c.method {
	case keycast.RPCSignEvent:
		d.ev, ok = fastEventObject(c.params[0], pub)
	case keycast.RPCNIP44Encrypt:
		var ok2 bool
		d.peer, ok = stringParam(c.params, 0)
		d.text, ok2 = stringParam(c.params, 1)
		ok = ok && ok2
	}
	return d, ok
}

// decodeJSON is the same decoding by encoding/json, as the server did it before jsonfast.go (and
// still does for any body the single pass refuses): validate, decode the call, decode the event
// or the string parameters.
func decodeJSON(b []byte, pub string) (decodedCall, bool) {
	var wire struct {
		Method *string           `json:"method"`
		Params []json.RawMessage `json:"params"`
	}
	if !json.Valid(b) || json.Unmarshal(b, &wire) != nil || wire.Method == nil {
		return decodedCall{}, false
	}
	d := decodedCall{method: *wire.Method}
	ok := true
	switch d.method {
	case keycast.RPCSignEvent:
		d.ev, ok = fastEvent(wire.Params[0], pub) // encoding/json, with the same own-key shortcut
	case keycast.RPCNIP44Encrypt:
		ok = json.Unmarshal(wire.Params[0], &d.peer) == nil && json.Unmarshal(wire.Params[1], &d.text) == nil
	}
	return d, ok
}

func TestDecodersAgreeOnTheRealBodies(t *testing.T) {
	pub, names, bodies := rpcBodies()
	for _, name := range names {
		f, ok1 := decodeFast(bodies[name], pub)
		j, ok2 := decodeJSON(bodies[name], pub)
		fj, _ := json.Marshal(f.ev)
		jj, _ := json.Marshal(j.ev)
		if !ok1 || !ok2 || f.method != j.method || string(fj) != string(jj) || f.peer != j.peer || f.text != j.text {
			t.Fatalf("%s: fast %+v %v, encoding/json %+v %v", name, f, ok1, j, ok2)
		}
	}
}

var decoders = []struct {
	name string
	fn   func([]byte, string) (decodedCall, bool)
}{{"jsonfast", decodeFast}, {"encoding_json", decodeJSON}}

func BenchmarkDecodeRPC(b *testing.B) {
	pub, names, bodies := rpcBodies()
	// A sign_event with a long content and a few tags: the cost grows with the body for both.
	long := strings.Replace(string(bodies["sign_event"]), `"tags":[]`,
		`"tags":[["e","`+strings.Repeat("a", 64)+`"],["p","`+pub+`"],["t","nostr"]]`, 1)
	long = strings.Replace(long, `"content":"`, `"content":"`+strings.Repeat("lorem ipsum ", 80), 1)
	names, bodies["sign_event_1k"] = append(names, "sign_event_1k"), []byte(long)
	for _, name := range names {
		body := bodies[name]
		for _, d := range append(decoders, extraDecoders...) {
			b.Run(name+"/"+d.name, func(b *testing.B) {
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				cpu0 := processCPU()
				for b.Loop() {
					if _, ok := d.fn(body, pub); !ok {
						b.Fatal("refused " + strconv.Quote(string(body)))
					}
				}
				b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}
