package keycastload

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/keycast"
)

// BenchmarkRunAgainstExternalServer drives a server that is already running (KEYCAST_BENCH_URL,
// users from KEYCAST_BENCH_USERS) so that the generator's CPU can be profiled on its own
// (-cpuprofile); bench/keycast-generator.sh measures it against hey and vegeta.
func BenchmarkRunAgainstExternalServer(b *testing.B) {
	url, users := os.Getenv("KEYCAST_BENCH_URL"), os.Getenv("KEYCAST_BENCH_USERS")
	if url == "" || users == "" {
		b.Skip("set KEYCAST_BENCH_URL and KEYCAST_BENCH_USERS to a running server and its users file")
	}
	uf, err := keycast.ReadUsersFile(users)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	res, err := Run(context.Background(), RunConfig{URL: url, Concurrency: 50, Requests: int64(b.N), Scenario: keycast.ScenarioWarmCache,
		Method: keycast.MethodGetPublicKey, Users: uf.Users, ReportInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	if res.Summary.SuccessfulRequests != uint64(b.N) {
		b.Fatalf("%+v %v", res.Summary, res.FailureCauses())
	}
}
