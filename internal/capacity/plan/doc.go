// Package plan reads and validates Keycast capacity plans (reference keycast.md §2.2, §2.3, §2.8):
// the strict JSON parser, every validation rule with upstream's messages, the host rules and the
// evidence file-name sanitizer. Package capacity runs plans and re-exports this API; the parser lives
// here, apart from the load engine, so that fuzzing it instruments only what it uses.
package plan
