//go:build goexperiment.jsonv2

package keycastserver

import (
	"encoding/json/jsontext"
	jsonv2 "encoding/json/v2"
	"strconv"

	"github.com/loadproof/loadproof/internal/keycast"
)

// extraDecoders: encoding/json/v2, the standard library's next JSON package (Go 1.25+, behind
// GOEXPERIMENT=jsonv2), which validates while it decodes (one pass, like jsonfast).
var extraDecoders = []struct {
	name string
	fn   func([]byte, string) (decodedCall, bool)
}{{"json_v2", decodeV2}}

func decodeV2(b []byte, pub string) (decodedCall, bool) {
	var wire struct {
		Method *string          `json:"method"`
		Params []jsontext.Value `json:"params"`
	}
	if jsonv2.Unmarshal(b, &wire) != nil || wire.Method == nil {
		return decodedCall{}, false
	}
	d := decodedCall{method: *wire.Method}
	switch d.method {
	case keycast.RPCSignEvent:
		var w struct {
			ID        *string         `json:"id"`
			PubKey    *string         `json:"pubkey"`
			CreatedAt *jsontext.Value `json:"created_at"`
			Kind      *jsontext.Value `json:"kind"`
			Tags      *[][]string     `json:"tags"`
			Content   *string         `json:"content"`
		}
		if jsonv2.Unmarshal(wire.Params[0], &w) != nil || w.PubKey == nil || *w.PubKey != pub ||
			w.CreatedAt == nil || w.Kind == nil || w.Tags == nil || w.Content == nil {
			return d, false
		}
		ts, err1 := strconv.ParseInt(string(*w.CreatedAt), 10, 64)
		kind, err2 := strconv.ParseInt(string(*w.Kind), 10, 64)
		if err1 != nil || err2 != nil || ts < 0 || kind < 0 || kind > keycast.MaxKind {
			return d, false
		}
		d.ev = keycast.UnsignedEvent{ID: w.ID, PubKey: pub, CreatedAt: ts, Kind: int(kind), Tags: *w.Tags, Content: *w.Content}
	case keycast.RPCNIP44Encrypt:
		if jsonv2.Unmarshal(wire.Params[0], &d.peer) != nil || jsonv2.Unmarshal(wire.Params[1], &d.text) != nil {
			return d, false
		}
	}
	return d, true
}
