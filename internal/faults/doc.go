// Package faults is loadproof's fault suite: tests that put real faults between each load client
// and each reference server (Toxiproxy's toxics, embedded; a server killed or stopped mid-run; an
// evidence directory read-only or full; SQLite locked by another process; PostgreSQL restarted) and
// assert what the client and the server report. docs/reliability.md, Fault suite, lists every
// scenario and its expected outcome.
//
// The tests are Linux only (mount(2), /proc, SIGSTOP, the Debian PostgreSQL tools); the package has
// no code of its own beyond this comment.
package faults
