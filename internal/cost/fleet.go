package cost

// Fleet is the machines a coordinated run's load came from and their prices: each worker's (from
// the machine record it joined with, its --cost-per-hour) and the coordinator's. A nil *Fleet is a
// run on one machine.
type Fleet struct {
	Workers     []Price
	Coordinator Price
	// Local says the workers were spawned on the coordinator's machine: one machine, one price.
	Local bool
}

// LoadPrices are the prices of the machines a run's load came from, one per machine, given load,
// the client's own price: load alone on one machine (f nil); under a coordinator, each worker's
// price (load standing for a worker that gave none) and the coordinator's; with the workers spawned
// beside the coordinator, that one machine's price (the coordinator's, else load).
func (f *Fleet) LoadPrices(load Price) []Price {
	if f == nil {
		return []Price{load}
	}
	if f.Local {
		if f.Coordinator.Given {
			return []Price{f.Coordinator}
		}
		return []Price{load}
	}
	out := make([]Price, 0, len(f.Workers)+1)
	for _, w := range f.Workers {
		if !w.Given {
			w = load
		}
		out = append(out, w)
	}
	return append(out, f.Coordinator)
}

// Given reports whether any machine of the fleet was given a price (false for a nil *Fleet).
func (f *Fleet) Given() bool {
	if f == nil {
		return false
	}
	if f.Coordinator.Given {
		return true
	}
	for _, w := range f.Workers {
		if w.Given {
			return true
		}
	}
	return false
}
