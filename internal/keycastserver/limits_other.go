//go:build !unix

package keycastserver

// openFileLimit reports no limit where the system has no RLIMIT_NOFILE.
func openFileLimit() (uint64, bool) { return 0, false }

// isFDExhausted is false here: the accept loop backs off on every accept error.
func isFDExhausted(error) bool { return false }
