package keycast

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/loadproof/loadproof/internal/textclip"
	"strconv"
	"strings"
)

// Event is a signed NIP-01 event, field order as rust-nostr serializes it.
type Event struct {
	ID        string     `json:"id"`
	PubKey    string     `json:"pubkey"`
	CreatedAt int64      `json:"created_at"`
	Kind      int        `json:"kind"`
	Tags      [][]string `json:"tags"`
	Content   string     `json:"content"`
	Sig       string     `json:"sig"`
}

// UnsignedEvent is the sign_event parameter: an event without a signature and
// with an optional id. When ID is set, signing checks it against the id
// computed from the other fields.
type UnsignedEvent struct {
	ID        *string    `json:"id,omitempty"`
	PubKey    string     `json:"pubkey"`
	CreatedAt int64      `json:"created_at"`
	Kind      int        `json:"kind"`
	Tags      [][]string `json:"tags"`
	Content   string     `json:"content"`
}

// Errors of ParseUnsignedEvent. Their text is the Keycast wire message prefix:
// the full message is "<prefix>: <detail>" and errors.Is matches the prefix.
var (
	// ErrInvalidEventJSON is the class of errors for an event parameter sent
	// as a JSON string (NIP-46 style) that does not hold a valid event.
	ErrInvalidEventJSON = errors.New("Invalid event JSON")
	// ErrInvalidEventFormat is the class of errors for an event parameter
	// sent as a JSON value that is not a valid unsigned event.
	ErrInvalidEventFormat = errors.New("Invalid event format")
)

// MaxKind is the largest event kind (kinds are u16 in rust-nostr).
const MaxKind = 65535

// wireUnsigned detects missing fields; json.RawMessage keeps number text for
// exact range checks.
type wireUnsigned struct {
	ID        *string          `json:"id"`
	PubKey    *string          `json:"pubkey"`
	CreatedAt *json.RawMessage `json:"created_at"`
	Kind      *json.RawMessage `json:"kind"`
	Tags      *[][]string      `json:"tags"`
	Content   *string          `json:"content"`
}

// ParseUnsignedEvent parses a sign_event parameter, which is either an event
// object or a JSON string holding the event object (NIP-46 style). Required
// fields: pubkey (64 hex, a curve point), created_at (unsigned integer), kind
// (0..65535), tags (array of string arrays), content (string); id is optional
// (64 hex). Unknown fields are ignored, as rust-nostr does. Errors wrap
// ErrInvalidEventJSON for the string form and ErrInvalidEventFormat for the
// object form; their text is the 400 message Keycast sends.
func ParseUnsignedEvent(raw json.RawMessage) (UnsignedEvent, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) > 0 && trimmed[0] == '"' {
		var inner string
		if err := json.Unmarshal(trimmed, &inner); err != nil {
			return UnsignedEvent{}, fmt.Errorf("%w: %s", ErrInvalidEventJSON, jsonErrText(err))
		}
		ev, err := parseUnsignedObject([]byte(inner))
		if err != nil {
			return UnsignedEvent{}, fmt.Errorf("%w: %s", ErrInvalidEventJSON, err.Error())
		}
		return ev, nil
	}
	ev, err := parseUnsignedObject(trimmed)
	if err != nil {
		return UnsignedEvent{}, fmt.Errorf("%w: %s", ErrInvalidEventFormat, err.Error())
	}
	return ev, nil
}

// jsonErrText turns encoding/json errors into short texts without the Go
// type names that mean nothing to an API client.
func jsonErrText(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%s at offset %d", se.Error(), se.Offset)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return fmt.Sprintf("invalid type: %s for field `%s`", te.Value, te.Field)
		}
		return fmt.Sprintf("invalid type: %s, expected an event object", te.Value)
	}
	return err.Error()
}

func parseUnsignedObject(b []byte) (UnsignedEvent, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return UnsignedEvent{}, errors.New("empty value, expected an event object")
	}
	if b[0] != '{' {
		if !json.Valid(b) {
			return UnsignedEvent{}, errors.New("not valid JSON, expected an event object")
		}
		return UnsignedEvent{}, errors.New("invalid type: expected an event object")
	}
	var w wireUnsigned
	if err := json.Unmarshal(b, &w); err != nil {
		return UnsignedEvent{}, errors.New(jsonErrText(err))
	}
	var ev UnsignedEvent
	switch {
	case w.PubKey == nil:
		return ev, errors.New("missing field `pubkey`")
	case w.CreatedAt == nil:
		return ev, errors.New("missing field `created_at`")
	case w.Kind == nil:
		return ev, errors.New("missing field `kind`")
	case w.Tags == nil:
		return ev, errors.New("missing field `tags`")
	case w.Content == nil:
		return ev, errors.New("missing field `content`")
	}
	pk, err := ParsePublicKey(*w.PubKey)
	if err != nil {
		return ev, fmt.Errorf("invalid pubkey: %s", strings.TrimPrefix(err.Error(), "keycast: "))
	}
	ev.PubKey = pk.Hex()
	ts, err := strconv.ParseInt(string(*w.CreatedAt), 10, 64)
	if err != nil || ts < 0 {
		return ev, fmt.Errorf("invalid created_at %s: expected an unsigned integer of seconds", textclip.String(string(*w.CreatedAt), 40))
	}
	ev.CreatedAt = ts
	kind, err := strconv.ParseInt(string(*w.Kind), 10, 64)
	if err != nil || kind < 0 || kind > MaxKind {
		return ev, fmt.Errorf("invalid kind %s: expected an integer from 0 to %d", textclip.String(string(*w.Kind), 40), MaxKind)
	}
	ev.Kind = int(kind)
	ev.Tags = *w.Tags
	if ev.Tags == nil {
		return ev, errors.New("invalid type: null for field `tags`, expected an array")
	}
	for i, t := range ev.Tags {
		if t == nil {
			return ev, fmt.Errorf("invalid tag %d: null, expected an array of strings", i)
		}
	}
	ev.Content = *w.Content
	if w.ID != nil {
		id := strings.ToLower(*w.ID)
		if len(id) != 64 || !isHex(id) {
			return ev, fmt.Errorf("invalid id %q: expected 64 hex characters", textclip.String(*w.ID, 80))
		}
		ev.ID = &id
	}
	return ev, nil
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// AppendEventIDPreimage appends the NIP-01 serialization
// [0,"<pubkey>",<created_at>,<kind>,<tags>,"<content>"] (compact, serde_json
// string escaping, no HTML escaping, raw UTF-8) to dst.
func AppendEventIDPreimage(dst []byte, pubkeyHex string, createdAt int64, kind int, tags [][]string, content string) []byte {
	dst = append(dst, `[0,`...)
	dst = appendJSONString(dst, pubkeyHex)
	dst = append(dst, ',')
	dst = strconv.AppendInt(dst, createdAt, 10)
	dst = append(dst, ',')
	dst = strconv.AppendInt(dst, int64(kind), 10)
	dst = append(dst, ',', '[')
	for i, t := range tags {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '[')
		for j, v := range t {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, v)
		}
		dst = append(dst, ']')
	}
	dst = append(dst, ']', ',')
	dst = appendJSONString(dst, content)
	return append(dst, ']')
}

// EventID returns the NIP-01 event id: SHA-256 of AppendEventIDPreimage.
func EventID(pubkeyHex string, createdAt int64, kind int, tags [][]string, content string) [32]byte {
	var buf [512]byte
	return sha256.Sum256(AppendEventIDPreimage(buf[:0], pubkeyHex, createdAt, kind, tags, content))
}

// SignEvent computes the id of ev and signs it with s, with fresh aux
// randomness as rust-nostr does. ev.PubKey must be the signer's key, and a
// supplied ev.ID must equal the computed id.
func SignEvent(s *Signer, ev UnsignedEvent) (Event, error) {
	pub := s.pubHex
	if !strings.EqualFold(ev.PubKey, pub) {
		return Event{}, fmt.Errorf("event pubkey %s does not match the signer's pubkey %s", ev.PubKey, pub)
	}
	if ev.Kind < 0 || ev.Kind > MaxKind {
		return Event{}, fmt.Errorf("event kind %d is outside 0..%d", ev.Kind, MaxKind)
	}
	tags := ev.Tags
	if tags == nil {
		tags = [][]string{}
	}
	id := EventID(pub, ev.CreatedAt, ev.Kind, tags, ev.Content)
	// The id's and the signature's hex share one allocation.
	var hx [192]byte
	hex.Encode(hx[:64], id[:])
	if ev.ID != nil && !strings.EqualFold(*ev.ID, string(hx[:64])) {
		return Event{}, fmt.Errorf("event id %s does not match the computed id %s", *ev.ID, hx[:64])
	}
	sig, err := s.SignRandom(id)
	if err != nil {
		return Event{}, err
	}
	hex.Encode(hx[64:], sig[:])
	both := string(hx[:])
	return Event{
		ID:        both[:64],
		PubKey:    pub,
		CreatedAt: ev.CreatedAt,
		Kind:      ev.Kind,
		Tags:      tags,
		Content:   ev.Content,
		Sig:       both[64:],
	}, nil
}

// VerifyEvent checks that ev.ID is the NIP-01 id of its fields and ev.Sig a
// valid BIP-340 signature of it by ev.PubKey.
func VerifyEvent(ev Event) error {
	pk, err := ParsePublicKey(ev.PubKey)
	if err != nil {
		return fmt.Errorf("keycast: event pubkey: %w", err)
	}
	id := EventID(strings.ToLower(ev.PubKey), ev.CreatedAt, ev.Kind, ev.Tags, ev.Content)
	var got [32]byte
	if len(ev.ID) != 64 {
		return fmt.Errorf("keycast: event id has %d characters; want 64 hex", len(ev.ID))
	}
	if _, err := hex.Decode(got[:], []byte(ev.ID)); err != nil {
		return fmt.Errorf("keycast: event id is not hex: %v", err)
	}
	if got != id {
		return fmt.Errorf("keycast: event id %s does not match the computed id %s", ev.ID, hex.EncodeToString(id[:]))
	}
	var sig [64]byte
	if len(ev.Sig) != 128 {
		return fmt.Errorf("keycast: event sig has %d characters; want 128 hex", len(ev.Sig))
	}
	if _, err := hex.Decode(sig[:], []byte(ev.Sig)); err != nil {
		return fmt.Errorf("keycast: event sig is not hex: %v", err)
	}
	if !VerifySchnorr(pk, id, sig) {
		return fmt.Errorf("keycast: event %s has an invalid signature", ev.ID)
	}
	return nil
}

// AppendJSON appends ev as compact JSON in NIP-01 field order with serde_json
// string escaping; it is what the server writes as the sign_event result and
// is faster than encoding/json.
func (ev *Event) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"id":`...)
	dst = appendJSONString(dst, ev.ID)
	dst = append(dst, `,"pubkey":`...)
	dst = appendJSONString(dst, ev.PubKey)
	dst = append(dst, `,"created_at":`...)
	dst = strconv.AppendInt(dst, ev.CreatedAt, 10)
	dst = append(dst, `,"kind":`...)
	dst = strconv.AppendInt(dst, int64(ev.Kind), 10)
	dst = append(dst, `,"tags":[`...)
	for i, t := range ev.Tags {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '[')
		for j, v := range t {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, v)
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `],"content":`...)
	dst = appendJSONString(dst, ev.Content)
	dst = append(dst, `,"sig":`...)
	dst = appendJSONString(dst, ev.Sig)
	return append(dst, '}')
}
