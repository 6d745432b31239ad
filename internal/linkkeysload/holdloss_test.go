package linkkeysload

import (
	"testing"

	"github.com/loadproof/loadproof/internal/linkkeysresult"
)

// TestHoldLoss: the count at the end of the hold is authoritative; reasons the watcher did not see
// are unknown.
func TestHoldLoss(t *testing.T) {
	if got := holdLoss(3, HoldLoss{Reasons: map[string]int64{linkkeysresult.LossReset: 1}}); got.Lost != 3 ||
		got.Reasons[linkkeysresult.LossReset] != 1 || got.Reasons[linkkeysresult.LossUnknown] != 2 {
		t.Errorf("holdLoss %+v", got)
	}
	if got := holdLoss(2, HoldLoss{Reasons: map[string]int64{linkkeysresult.LossClosed: 5}}); got.Lost != 2 ||
		got.Reasons[linkkeysresult.LossClosed] != 2 || len(got.Reasons) != 1 {
		t.Errorf("holdLoss caps the seen reasons at the count: %+v", got)
	}
	if holdLoss(0, HoldLoss{Reasons: map[string]int64{linkkeysresult.LossReset: 1}}) != nil {
		t.Error("a hold with nothing lost has a loss")
	}
}
