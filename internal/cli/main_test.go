package cli

import (
	"os"
	"testing"
)

// childTreeEnv makes this test binary act as linkkeys-loadtest when a test starts it again as a
// server or a client worker (the capacity end-to-end test does).
const childTreeEnv = "LOADPROOF_CLI_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childTreeEnv) == "linkkeys" {
		os.Exit(Main(LinkKeys))
	}
	os.Exit(m.Run())
}
