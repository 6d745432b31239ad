package keycastserver

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/loadproof/loadproof/internal/keycast"
)

// parseEventFor parses a sign_event parameter for a signer whose x-only key is signerHex
// (lower-case). keycast.ParseUnsignedEvent checks that the event's pubkey is a curve point,
// which costs a field square root (about a sixth of a sign_event's CPU); when the pubkey is
// exactly the signer's own key that check is already known to pass. So an event object whose
// pubkey equals signerHex is decoded here with the same rules, and everything else (the
// string form, another pubkey, any field that is missing or out of range) goes to
// keycast.ParseUnsignedEvent, which gives the authoritative answer and error text. FuzzEventFast
// checks that whatever this accepts, keycast.ParseUnsignedEvent accepts identically.
func parseEventFor(raw json.RawMessage, signerHex string) (keycast.UnsignedEvent, error) {
	if ev, ok := fastEventObject(raw, signerHex); ok {
		return ev, nil
	}
	if ev, ok := fastEvent(raw, signerHex); ok {
		return ev, nil
	}
	return keycast.ParseUnsignedEvent(raw)
}

// fastEvent is the fast path of parseEventFor; ok is false whenever the full parser must decide.
func fastEvent(raw json.RawMessage, signerHex string) (keycast.UnsignedEvent, bool) {
	b := bytes.TrimSpace(raw)
	if len(b) == 0 || b[0] != '{' {
		return keycast.UnsignedEvent{}, false
	}
	var w struct {
		ID        *string          `json:"id"`
		PubKey    *string          `json:"pubkey"`
		CreatedAt *json.RawMessage `json:"created_at"`
		Kind      *json.RawMessage `json:"kind"`
		Tags      *[][]string      `json:"tags"`
		Content   *string          `json:"content"`
	}
	if json.Unmarshal(b, &w) != nil || w.PubKey == nil || *w.PubKey != signerHex ||
		w.CreatedAt == nil || w.Kind == nil || w.Tags == nil || *w.Tags == nil || w.Content == nil {
		return keycast.UnsignedEvent{}, false
	}
	ts, err := strconv.ParseInt(string(*w.CreatedAt), 10, 64)
	if err != nil || ts < 0 {
		return keycast.UnsignedEvent{}, false
	}
	kind, err := strconv.ParseInt(string(*w.Kind), 10, 64)
	if err != nil || kind < 0 || kind > keycast.MaxKind {
		return keycast.UnsignedEvent{}, false
	}
	for _, t := range *w.Tags {
		if t == nil {
			return keycast.UnsignedEvent{}, false
		}
	}
	ev := keycast.UnsignedEvent{PubKey: signerHex, CreatedAt: ts, Kind: int(kind), Tags: *w.Tags, Content: *w.Content}
	if w.ID != nil {
		id := strings.ToLower(*w.ID)
		if len(id) != 64 || !isLowerHex(id) {
			return keycast.UnsignedEvent{}, false
		}
		ev.ID = &id
	}
	return ev, true
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
