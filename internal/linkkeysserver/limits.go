package linkkeysserver

import (
	"log/slog"

	"golang.org/x/sys/unix"
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
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		logger.Warn("linkkeysserver: cannot read RLIMIT_NOFILE", "err", err)
		return 0
	}
	if lim.Cur < lim.Max {
		raised := lim
		raised.Cur = lim.Max
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &raised); err != nil {
			logger.Warn("linkkeysserver: cannot raise the soft RLIMIT_NOFILE to the hard limit", "soft", lim.Cur, "hard", lim.Max, "err", err)
		} else {
			lim = raised
		}
	}
	logger.Info("fd limit", "soft", lim.Cur, "hard", lim.Max, "max_connections", maxConnections)
	if maxConnections+fdHeadroom > lim.Cur {
		logger.Warn("TCP_MAX_CONNECTIONS + 256 exceeds the soft file-descriptor limit; connections beyond the limit fail at accept with EMFILE. Raise `ulimit -n` or lower TCP_MAX_CONNECTIONS",
			"max_connections", maxConnections, "soft_limit", lim.Cur)
	}
	return lim.Cur
}
