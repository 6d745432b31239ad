package cli

import (
	"os"
	"path/filepath"
)

// Output checks. A command that writes its result only after the work (run's results, setup's users
// file with their access tokens, profile's files) checks first that it will be able to: otherwise a
// whole load test, or a batch of accounts whose tokens exist nowhere else, is lost to a typo or a
// read-only directory.

// checkOutputFile checks that path can be written by a later atomic write (a temporary file in the
// same directory, then a rename): path is not a directory, its directory exists (it is created if
// missing, as the writers would) and a file can be created and removed in it. flag names the flag in
// the message.
func checkOutputFile(flag, path string) error {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return usageError("%s %s is a directory; name the file to write", flag, path)
	}
	return checkOutputDir(flag, filepath.Dir(path))
}

// checkOutputDir creates dir if missing and checks that a file can be created and removed in it.
func checkOutputDir(flag, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return usageError("%s: cannot create the directory %s: %v; choose a writable path", flag, dir, err)
	}
	f, err := os.CreateTemp(dir, ".loadproof-write-check-*")
	if err != nil {
		return usageError("%s: cannot write in %s: %v; choose a writable path", flag, dir, err)
	}
	name := f.Name()
	f.Close()
	if err := os.Remove(name); err != nil {
		return usageError("%s: cannot remove a file in %s: %v; choose a writable path", flag, dir, err)
	}
	return nil
}
