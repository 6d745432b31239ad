// Package e2e holds the end-to-end test of internal/capacity: a whole profile run with the real load
// engine against the Keycast reference server started on 127.0.0.1:0. It lives apart from the
// capacity package so that fuzzing capacity's plan parser does not have to instrument the server and
// its SQLite driver. It has no code of its own.
package e2e
