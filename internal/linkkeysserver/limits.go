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
// startup. It returns the soft limit in force.
func RaiseAndReportFDLimit(logger *slog.Logger, maxConnections uint64) uint64 {
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
	if maxConnections+fdHeadroom > soft {
		logger.Warn("TCP_MAX_CONNECTIONS + 256 exceeds the soft file-descriptor limit; connections beyond the limit fail at accept with EMFILE. Raise `ulimit -n` or lower TCP_MAX_CONNECTIONS",
			"max_connections", maxConnections, "soft_limit", soft)
	}
	return soft
}
