package linkkeysserver

import (
	"log/slog"

	"github.com/loadproof/loadproof/internal/machine"
)

// fdHeadroom is the descriptors a server needs beyond its connections
// (listeners, the database, logs, epoll): the upstream warns when
// max_connections + 256 exceeds the soft limit.
const fdHeadroom = 256

// RaiseAndReportFDLimit raises the soft RLIMIT_NOFILE to the hard limit and
// logs the effective soft and hard limits with maxConnections, warning when
// maxConnections+256 exceeds the soft limit, as upstream reports both at
// startup. With processes > 1 each process holds only its share of
// maxConnections (Config.Share), so the warning weighs the largest share
// against the limit, which every child inherits. It returns the soft limit
// in force.
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
		share := splitCount(maxConnections, processes, 0) // the largest share
		if share+fdHeadroom > soft {
			logger.Warn("each server process's share of TCP_MAX_CONNECTIONS + 256 exceeds the soft file-descriptor limit; connections beyond it fail at accept with EMFILE. Raise `ulimit -n`, add --processes or lower TCP_MAX_CONNECTIONS",
				"max_connections", maxConnections, "processes", processes, "per_process", share, "soft_limit", soft)
		}
		return soft
	}
	if maxConnections+fdHeadroom > soft {
		logger.Warn("TCP_MAX_CONNECTIONS + 256 exceeds the soft file-descriptor limit; connections beyond the limit fail at accept with EMFILE. Raise `ulimit -n` or lower TCP_MAX_CONNECTIONS",
			"max_connections", maxConnections, "soft_limit", soft)
	}
	return soft
}
