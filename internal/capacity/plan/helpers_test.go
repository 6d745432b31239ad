package plan

import "github.com/loadproof/loadproof/internal/keycast"

// testPlan is upstream's test fixture plan: six phases of one second, every non-spike phase under the
// SLO, the spike declaring shedding at 1%.
func testPlan() *Plan {
	p := &Plan{
		ProfileName:       "local-cloud-run",
		ProfilePlatform:   PlatformCloudRun,
		TargetURL:         "http://localhost:3000",
		UsersFile:         "users.json",
		Seed:              371,
		Revisions:         Revisions{Code: "abc123", Image: "sha256:example", Infrastructure: "local-compose-v1"},
		EnvironmentParity: "Local rehearsal only",
		Objectives:        Objectives{AvailabilityPercent: 99.9, LatencyP95Ms: 500},
		StopConditions:    StopConditions{MaxErrorRate: 0.05, MaxLatencyP95Ms: 1000},
	}
	for _, k := range RequiredKinds {
		ph := Phase{
			Name: string(k), Kind: k, Method: keycast.MethodGetPublicKey, Scenario: keycast.ScenarioMixed,
			Concurrency: 1, DurationSeconds: 1, MaxErrorRate: 0.01, MaxLatencyP95Ms: 500, SLOApplies: k != KindSpike,
		}
		if k == KindSpike {
			ph.IntentionalShedding = &Shedding{Status: 503, ErrorCode: "admission_rejected", MinRate: 0.01}
		}
		p.Phases = append(p.Phases, ph)
	}
	return p
}
