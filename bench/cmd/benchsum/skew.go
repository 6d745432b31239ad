package main

import (
	"fmt"
	"math"
	"sort"

	"github.com/loadproof/loadproof/internal/coord"
)

func runSkew(e *env, args []string) error {
	if err := wantArgs(args, 1, 1); err != nil {
		return err
	}
	m, err := coord.ReadManifest(args[0])
	if err != nil {
		return err
	}
	if len(m.Tasks) == 0 || len(m.Tasks[0].Starts) == 0 || len(m.Workers) == 0 {
		return fmt.Errorf("%s: no task with worker starts, or no workers", args[0])
	}
	task := m.Tasks[0]
	d := make([]float64, len(task.Starts))
	for i, s := range task.Starts {
		d[i] = math.Abs(float64(s.Sub(task.StartAt))) / 1e6
	}
	sort.Float64s(d)
	rtt := m.Workers[0].RTTMs
	for _, w := range m.Workers {
		rtt = max(rtt, w.RTTMs)
	}
	e.printf("workers %d  spread %.2f ms  max |start - instant| %.2f ms  p50 %.2f ms  max rtt %.2f ms\n",
		len(d), task.StartSkewMs, d[len(d)-1], d[len(d)/2], rtt)
	return nil
}
