package cli

import (
	"os"
	"strings"
	"testing"
)

// childTreeEnv makes this test binary act as linkkeys-loadtest when a test starts it again as a
// server or a client worker (the capacity end-to-end test does).
const childTreeEnv = "LOADPROOF_CLI_TEST_CHILD"

// TestMain lets the test binary stand in for the binaries: as linkkeys-loadtest when childTreeEnv
// says so, as loadproof when mainEnv is set (the coordinator tests' worker processes inherit it).
func TestMain(m *testing.M) {
	if os.Getenv(childTreeEnv) == "linkkeys" {
		os.Exit(Main(LinkKeys))
	}
	if os.Getenv(mainEnv) == "1" && !fuzzWorker() {
		os.Exit(Main(Loadproof))
	}
	os.Setenv(mainEnv, "1") // inherited by the processes the tests start, never read again here
	os.Exit(m.Run())
}

// fuzzWorker reports whether this process is a worker the fuzzing engine started (it inherits
// mainEnv, but must run the fuzz target, not the command tree).
func fuzzWorker() bool {
	for _, a := range os.Args[1:] {
		if strings.HasPrefix(a, "-test.fuzzworker") {
			return true
		}
	}
	return false
}
