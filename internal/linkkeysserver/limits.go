package linkkeysserver

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/loadproof/loadproof/internal/machine"
)

// fdHeadroom is the descriptors a server process keeps for itself beyond its
// connections: the listener, the database (its file, journal and pool),
// stdin, stdout and stderr (a child's pipes to the parent), the pollers'
// epoll and wake-up descriptors, the metrics endpoint and its scrapes, and
// the socket a full server accepts only to shed. A child opens about 20 of
// them; 256 is the figure upstream already reserves (it warns when
// max_connections + 256 exceeds the soft limit), kept so that one rule
// decides both the warning and where a process counts itself full, with room
// to spare for what a deployment adds (a log file, a profile endpoint). The
// connections already queued to a process when the fill moves on are not in
// it: the fill's marks leave room for them (fillMarks).
const fdHeadroom = 256

// UsableDescriptors returns the connections a process whose soft
// RLIMIT_NOFILE is nofile can hold: nofile less fdHeadroom, and 0 below it.
func UsableDescriptors(nofile uint64) uint64 {
	if nofile <= fdHeadroom {
		return 0
	}
	return nofile - fdHeadroom
}

// processNofile raises this process's soft RLIMIT_NOFILE to the hard limit
// where it can and returns the soft limit then in force, or 0 when it cannot
// be read (a system without one).
func processNofile(logger *slog.Logger) uint64 {
	soft, hard, err := machine.Nofile()
	if err != nil {
		return 0
	}
	if soft < hard {
		if raised, err := machine.RaiseNofile(); err != nil {
			logger.Warn("linkkeysserver: cannot raise the soft RLIMIT_NOFILE to the hard limit", "soft", soft, "hard", hard, "err", err)
		} else {
			soft = raised
		}
	}
	return soft
}

// RaiseAndReportFDLimit raises the soft RLIMIT_NOFILE to the hard limit and
// logs the effective soft and hard limits with maxConnections, warning when
// maxConnections+256 exceeds the soft limit, as upstream reports both at
// startup. With processes > 1 it only reports: each child raises and reports
// its own limit, and the parent weighs the children's limits together once
// they have started (ProcessFDProblem, SupervisorOptions.MaxConnections).
// It returns the soft limit in force.
func RaiseAndReportFDLimit(logger *slog.Logger, maxConnections uint64, processes int) uint64 {
	soft, hard, err := machine.Nofile()
	if err != nil {
		logger.Warn("linkkeysserver: cannot read RLIMIT_NOFILE", "err", err)
		return 0
	}
	if soft < hard {
		if raised, err := machine.RaiseNofile(); err != nil {
			logger.Warn("linkkeysserver: cannot raise the soft RLIMIT_NOFILE to the hard limit", "soft", soft, "hard", hard, "err", err)
		} else {
			soft = raised
		}
	}
	logger.Info("fd limit", "soft", soft, "hard", hard, "max_connections", maxConnections)
	if processes > 1 {
		return soft
	}
	if maxConnections+fdHeadroom > soft {
		logger.Warn("TCP_MAX_CONNECTIONS + 256 exceeds the soft file-descriptor limit; connections beyond the limit fail at accept with EMFILE. Raise `ulimit -n` or lower TCP_MAX_CONNECTIONS",
			"max_connections", maxConnections, "soft_limit", soft)
	}
	return soft
}

// ProcessFDProblem returns, for a server of len(nofiles) processes whose
// soft open-file limits are nofiles (as each child reported it, after its own
// raise) and whose TCP_MAX_CONNECTIONS is maxConnections, why it cannot hold
// maxConnections, or "" when it can (or a limit is unknown, 0). Each process
// holds at most UsableDescriptors of its limit (its cap and its fill mark
// come down to it), so the server holds at most their sum; the message names
// the numbers and how many processes would fit, ceil(maxConnections / the
// smallest usable count). Under FillSpread the kernel spreads connections
// evenly, so a process whose share exceeds its descriptors sheds while the
// others have room even when the sum is enough; that is reported too.
func ProcessFDProblem(maxConnections uint64, nofiles []uint64, fill Fill) string {
	n := len(nofiles)
	if n == 0 {
		return ""
	}
	var total uint64
	least := ^uint64(0)
	limits := make([]string, 0, n)
	for _, l := range nofiles {
		if l == 0 {
			return ""
		}
		u := UsableDescriptors(l)
		total += u
		least = min(least, u)
		limits = append(limits, strconv.FormatUint(l, 10))
	}
	lim := limits[0] // one figure when every process has the same limit
	for _, l := range limits {
		if l != lim {
			lim = strings.Join(limits, ", ")
			break
		}
	}
	if total < maxConnections {
		fit := "no number of processes would fit (each has no descriptor beyond the reserve); raise the hard limit (`ulimit -Hn`, LimitNOFILE=)"
		if least > 0 {
			k := (maxConnections + least - 1) / least
			fit = fmt.Sprintf("%d processes would fit: use --processes %d, raise the open-file limit (`ulimit -n`, up to the hard limit) or lower TCP_MAX_CONNECTIONS to %d", k, k, total)
		}
		return fmt.Sprintf("the %d server processes' open-file limits hold fewer connections than TCP_MAX_CONNECTIONS %d: "+
			"each process's soft limit (%s) less %d reserved leaves at least %d descriptors a process for connections, %d together, so the server holds at most %d "+
			"and each process counts itself full at its own limit; %s", n, maxConnections, lim, fdHeadroom, least, total, total, fit)
	}
	if fill == FillSpread {
		for i, l := range nofiles {
			if share := splitCount(maxConnections, n, i); share > UsableDescriptors(l) {
				return fmt.Sprintf("with --process-fill spread the kernel spreads new connections evenly, but process %d's share of TCP_MAX_CONNECTIONS %d is %d "+
					"and its soft open-file limit %d less %d reserved leaves %d: it sheds at its descriptors while the others have room. "+
					"Use --process-fill sequential, more processes or a higher open-file limit", i, maxConnections, share, l, fdHeadroom, UsableDescriptors(l))
			}
		}
	}
	return ""
}
