package linkkeysload

import (
	"fmt"
	"io"
	"strconv"
)

// Report redraws a command's DONE line and figures from its result file alone (the flags it
// recorded, its counts and histograms), so results from several workers or machines can be merged
// with Merge and reported as one run.
func Report(w io.Writer, r Result) error {
	u32 := func(name string) uint32 {
		v, _ := strconv.ParseUint(r.Flags[name], 10, 32)
		return uint32(v)
	}
	u64 := func(name string) uint64 {
		v, _ := strconv.ParseUint(r.Flags[name], 10, 64)
		return v
	}
	base, _ := ParseIPv4("client-ip-base", r.Flags["client-ip-base"])
	sources := SourceAddrs{Base: base, Count: u32("client-ip-count")}
	switch r.Command {
	case CmdConnections:
		cfg := ConnectionsConfig{Target: r.Target, Count: u32("count"), Concurrency: u32("concurrency"), HoldSecs: u64("hold-secs"), Sources: sources}
		WriteConnectionsHeader(w, cfg)
		WriteConnectionsDone(w, cfg, r)
	case CmdHandshakeBench:
		cfg := HandshakeConfig{Target: r.Target, DurationSecs: u64("duration-secs"), Concurrency: u32("concurrency"), Resume: r.Flags["resume"] == "true", Sources: sources}
		WriteHandshakeHeader(w, cfg)
		WriteHandshakeDone(w, cfg, r)
	case CmdRequestBench:
		rate, _ := strconv.ParseFloat(r.Flags["rate"], 64)
		cfg := RequestConfig{Target: r.Target, Connections: u32("connections"), DurationSecs: u64("duration-secs"),
			Op: r.Flags["op"], Pipeline: u32("pipeline"), Rate: rate, Sources: sources}
		WriteRequestHeader(w, cfg)
		WriteRequestDone(w, cfg, r)
	case CmdDDoS:
		cfg := DDoSConfig{Target: r.Target, Sources: u32("sources"), Concurrency: u32("concurrency"), Base: base}
		WriteDDoSHeader(w, cfg)
		WriteDDoSDone(w, cfg, r)
	default:
		return fmt.Errorf("linkkeysload: cannot report a result of command %q", r.Command)
	}
	if r.Server != nil {
		WriteAccounting(w, r.Server)
	}
	m := r.Machine
	fmt.Fprintf(w, "machine: %s, %d cores, kernel %s, nofile %d/%d, %s, loadproof %s; segments %d\n",
		m.CPUModel, m.Cores, m.Kernel, m.NofileSoft, m.NofileHard, m.GoVersion, m.LoadproofVersion, max(len(r.Segments), 1))
	return nil
}
