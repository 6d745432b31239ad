// Package plan reads and validates Keycast capacity plans (docs/protocol-keycast.md, Plan,
// Validation and Host rules):
// the strict JSON parser, every validation rule with upstream's messages, the host rules and the
// evidence file-name sanitizer. It also reads and validates LinkKeys plans (linkkeys.go;
// docs/capacity.md, LinkKeys plans) with the same strict parser. Package capacity runs plans and
// re-exports this API; the parser lives here, apart from the load engine, so that fuzzing it
// instruments only what it uses.
package plan
