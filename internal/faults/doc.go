// Package faults is loadproof's fault suite: tests that put real faults between each load client
// and each reference server and assert what the client and the server report. It has no code of
// its own beyond this comment; the tests live in its _test.go files.
package faults
