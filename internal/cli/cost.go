package cli

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"

	"github.com/spf13/pflag"

	"github.com/loadproof/loadproof/internal/capacity"
	"github.com/loadproof/loadproof/internal/cost"
	"github.com/loadproof/loadproof/internal/keycastresult"
	"github.com/loadproof/loadproof/internal/linkkeysresult"
	"github.com/loadproof/loadproof/internal/report"
	"github.com/loadproof/loadproof/internal/result"
	"github.com/loadproof/loadproof/internal/search"
)

// prices are --cost-per-hour (this load machine) and --server-cost-per-hour (the server's machine),
// read by cost.ParsePrice (docs/cost.md). Neither given: the run has no cost and nothing says one.
type prices struct {
	load, server cost.Price
	// fleet, set under coordinate (treeOpts.fleet), holds the prices of the run's machines.
	fleet *cost.Fleet
}

// loadPrices are the load machines' prices (cost.Fleet.LoadPrices).
func (p *prices) loadPrices() []cost.Price { return p.fleet.LoadPrices(p.load) }

// bind adds the two flags.
func (p *prices) bind(f *pflag.FlagSet) {
	f.Var(&p.load, "cost-per-hour", "the price of this load machine per hour, as 1.53 or 1.53USD: the result, its report and verify then give the run's cost and the cost of the capacity it proved (docs/cost.md)")
	f.Var(&p.server, "server-cost-per-hour", "the price of the server's machine per hour, as 1.53 or 1.53USD; counted apart from the load machines (docs/cost.md)")
}

// fromPlan takes a capacity plan's prices (cost_per_hour, server_cost_per_hour) where the flags
// gave none: a flag overrides the plan.
func (p *prices) fromPlan(load, server cost.Price) {
	if !p.load.Given {
		p.load = load
	}
	if !p.server.Given {
		p.server = server
	}
}

// given reports whether any price was given.
func (p *prices) given() bool { return p.load.Given || p.server.Given || p.fleet.Given() }

// check refuses prices that cannot add up (two currencies) before anything runs.
func (p *prices) check() error {
	if _, err := cost.Currency(append(p.loadPrices(), p.server)...); err != nil {
		return usageError("--cost-per-hour, --server-cost-per-hour: %v", err)
	}
	return nil
}

// apply prices the run whose envelope is e and whose capacity is capa (from the harness's figures).
func (p *prices) apply(e *result.Envelope, capa cost.Capacity) error {
	if !p.given() || e == nil {
		return nil
	}
	return e.SetCost(p.loadPrices(), p.server, capa)
}

// lkAfterWrite wraps a LinkKeys client's AfterWrite: with a price given, the written result is read
// back, priced from its own figures, and written again before it is signed, so the file and
// `verify` recompute the same cost. printed receives the cost for the summary's line.
func (p *prices) lkAfterWrite(next func(string) error, printed **cost.Cost) func(string) error {
	if !p.given() {
		return next
	}
	return func(path string) error {
		f, err := report.Open(path)
		if err == nil && f.LinkKeys == nil {
			err = fmt.Errorf("%s is a %s file, not the LinkKeys result just written", path, f.Kind)
		}
		if err != nil {
			return fmt.Errorf("pricing the result: %w", err)
		}
		res := f.LinkKeys
		if err := p.apply(&res.Envelope, res.CostCapacity()); err != nil {
			return fmt.Errorf("pricing the result: %w", err)
		}
		if err := res.Write(path); err != nil {
			return err
		}
		*printed = res.Cost
		if next != nil {
			return next(path)
		}
		return nil
	}
}

// lkPrintCost prints a LinkKeys client's "cost:" line: the cost written to the result file, or,
// without one, the cost of the result in memory.
func (p *prices) lkPrintCost(w io.Writer, res *linkkeysresult.Result, written *cost.Cost) error {
	if !p.given() || res == nil || res.Format == "" {
		return nil
	}
	c := written
	if c == nil {
		if err := p.apply(&res.Envelope, res.CostCapacity()); err != nil {
			return err
		}
		c = res.Cost
	}
	if c != nil {
		fmt.Fprintln(w, c.Line())
	}
	return nil
}

// keycastRunner prices each phase of a Keycast capacity run as it ends, before it is checked and
// written.
func (p *prices) keycastRunner(inner capacity.Runner) capacity.Runner {
	return func(ctx context.Context, run capacity.PhaseRun) (*keycastresult.Results, error) {
		res, err := inner(ctx, run)
		if res != nil && res.Envelope != nil {
			if perr := p.apply(res.Envelope, res.CostCapacity()); perr != nil && err == nil {
				err = perr
			}
		}
		return res, err
	}
}

// linkKeysPhase prices each phase of a LinkKeys capacity run (capacity.LinkKeysOptions.PricePhase);
// nil without a price.
func (p *prices) linkKeysPhase() func(*linkkeysresult.Result) error {
	if !p.given() {
		return nil
	}
	return func(res *linkkeysresult.Result) error { return p.apply(&res.Envelope, res.CostCapacity()) }
}

// phaseCost is one capacity phase's cost, for the summary.
type phaseCost struct {
	name string
	cost *cost.Cost
}

func keycastPhaseCosts(ev *capacity.Evidence) []phaseCost {
	var out []phaseCost
	for _, ph := range ev.Phases {
		if ph.Results != nil && ph.Results.Envelope != nil && ph.Results.Cost != nil {
			out = append(out, phaseCost{ph.Name, ph.Results.Cost})
		}
	}
	return out
}

func linkKeysPhaseCosts(ev *capacity.LinkKeysEvidence) []phaseCost {
	var out []phaseCost
	for _, ph := range ev.Phases {
		if ph.Results != nil && ph.Results.Cost != nil {
			out = append(out, phaseCost{ph.Name, ph.Results.Cost})
		}
	}
	return out
}

// printPhaseCosts prints each priced phase's "cost:" line and the whole run's (cost.Sum); nothing
// when no phase was priced.
func printPhaseCosts(w io.Writer, phases []phaseCost) {
	if len(phases) == 0 {
		return
	}
	parts := make([]*cost.Cost, len(phases))
	for i, ph := range phases {
		fmt.Fprintf(w, "phase %s %s\n", ph.name, ph.cost.Line())
		parts[i] = ph.cost
	}
	total, err := cost.Sum(parts...)
	if err != nil {
		fmt.Fprintf(w, "cost: the phases' costs do not add up: %v\n", err)
		return
	}
	fmt.Fprintf(w, "all phases: %s\n", total.Line())
}

// trialArgs hands the prices to each trial of a search: the client command prices its own run,
// so every trial's result file records its cost.
func (p *prices) trialArgs(args []string) []string {
	out := slices.Clone(args)
	if p.load.Given {
		out = append(out, "--cost-per-hour="+p.load.String())
	}
	if p.server.Given {
		out = append(out, "--server-cost-per-hour="+p.server.String())
	}
	return out
}

// printKneeCost prints the cost of the capacity a search proved: the knee step's trials' costs,
// read from their result files in the bundle (each recomputed by the client that wrote it).
func printKneeCost(w io.Writer, bundle string, res *search.Result) {
	if res.Knee == nil {
		return
	}
	for _, st := range res.Steps {
		if !st.Passed || st.Value != *res.Knee {
			continue
		}
		for _, t := range st.Trials {
			if t.File == "" {
				continue
			}
			env, err := search.ReadResultFile(filepath.Join(bundle, t.File))
			if err != nil || env.Cost == nil {
				continue
			}
			fmt.Fprintf(w, "at the knee (%s, trial %d) %s\n", search.FormatValue(st.Value), t.Trial, env.Cost.Line())
		}
		return
	}
}
