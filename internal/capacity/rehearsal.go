package capacity

import "github.com/loadproof/loadproof/internal/keycast"

// RehearsalOptions sizes a RehearsalPlan.
type RehearsalOptions struct {
	// Name is the profile name.
	Name string
	// URL and UsersFile are the target and the users file from setup.
	URL, UsersFile string
	// PhaseSeconds is every phase's duration (at least 1).
	PhaseSeconds uint64
	// SpikeConcurrency is the spike's concurrency; every other phase sends one request at a time.
	SpikeConcurrency int
	// DeclareShedding makes the spike declare the 503 admission_rejected contract (min rate 1 %).
	DeclareShedding bool
}

// RehearsalPlan is a short six-phase profile against a local reference server: every phase sends one
// request at a time except the spike, which sends CPU-heavy sign_event requests concurrently, so a
// server with few CPU slots and a short queue sheds in the spike and nowhere else. The demo and the
// end-to-end test use it; real profiles are written by hand (docs/capacity.md).
func RehearsalPlan(o RehearsalOptions) *Plan {
	p := &Plan{
		ProfileName:       o.Name,
		ProfilePlatform:   PlatformGKE,
		TargetURL:         o.URL,
		UsersFile:         o.UsersFile,
		Seed:              371,
		Revisions:         Revisions{Code: "rehearsal", Image: "embedded reference server", Infrastructure: "loadproof"},
		EnvironmentParity: "Reference server on loopback; a rehearsal, not platform evidence.",
		Objectives:        Objectives{AvailabilityPercent: 99, LatencyP95Ms: 2000},
		StopConditions:    StopConditions{MaxErrorRate: 0.5, MaxLatencyP95Ms: 5000},
	}
	methods := []keycast.Method{keycast.MethodGetPublicKey, keycast.MethodSignEvent, keycast.MethodNIP44Encrypt,
		keycast.MethodGetPublicKey, keycast.MethodSignEvent, keycast.MethodGetPublicKey}
	scenarios := []keycast.Scenario{keycast.ScenarioMixed, keycast.ScenarioMixed, keycast.ScenarioMixed,
		keycast.ScenarioWarmCache, keycast.ScenarioColdStart, keycast.ScenarioMixed}
	for i, k := range RequiredKinds {
		ph := Phase{
			Name: o.Name + " " + string(k), Kind: k, Method: methods[i], Scenario: scenarios[i],
			Concurrency: 1, DurationSeconds: max(o.PhaseSeconds, 1), MaxErrorRate: 0.01, MaxLatencyP95Ms: 2000, SLOApplies: true,
		}
		if k == KindSpike {
			ph.Concurrency, ph.SLOApplies, ph.MaxErrorRate = max(o.SpikeConcurrency, 1), false, 0.05
			if o.DeclareShedding {
				ph.IntentionalShedding = &Shedding{Status: 503, ErrorCode: keycast.CodeAdmissionRejected, MinRate: 0.01}
			}
		}
		p.Phases = append(p.Phases, ph)
	}
	return p
}
