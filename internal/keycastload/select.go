package keycastload

import "github.com/loadproof/loadproof/internal/keycast"

// HotCount is the size of the "hot" set of the mixed scenario: a tenth of the users, at least one.
func HotCount(users int) int { return max(users/10, 1) }

// SelectUser returns the index of the user that request number requestNum uses, exactly as the
// upstream tool's select_user_index (docs/protocol-keycast.md, User selection): r = requestNum +
// seed (wrapping); warm-cache always picks user 0; cold-start picks r mod N; mixed picks r mod hot
// when N <= hot or r mod 5 != 0 (about 80% of requests over the hot first tenth), else hot + r mod
// (N − hot) (about 20% rotating through the rest). users must be positive.
func SelectUser(scenario keycast.Scenario, users int, requestNum, seed uint64) int {
	if users <= 0 {
		return 0
	}
	r := requestNum + seed
	n := uint64(users)
	hot := uint64(HotCount(users))
	switch scenario {
	case keycast.ScenarioWarmCache:
		return 0
	case keycast.ScenarioColdStart:
		return int(r % n)
	default: // mixed
		if n <= hot {
			return int(r % n)
		}
		if r%5 != 0 {
			return int(r % hot)
		}
		return int(hot + r%(n-hot))
	}
}
