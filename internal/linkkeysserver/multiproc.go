package linkkeysserver

// Multi-process mode (--processes N).
//
// The parent reserves a port (a SO_REUSEPORT socket that is bound but never
// listens, so it takes no connections), starts N children of the same binary
// in their own process group, and sends each one line on stdin: the server
// key's 32-byte Ed25519 seed in hex, so every child presents the same
// certificate and no key touches the disk. Each child binds the port with
// SO_REUSEPORT, listens, and prints "READY <port> <nofile>" (its soft
// open-file limit, after raising it to the hard limit; 0 when unknown). Once
// all are ready the parent releases its reservation. Children then obey stdin lines: "metrics"
// prints one "running" METRICS line, "final" prints the "final" line and shuts
// the child down; SIGINT, SIGTERM and stdin EOF do the same as "final".
// Children also get SIGTERM if the parent dies (procexec).
//
// Budgets that bound a total are divided so the N processes together keep
// it: each child runs Config.Share(n, i) (see there). A child holds no more
// connections than its open-file limit less fdHeadroom allows: its cap, and
// in a sequential fill the mark at which it counts itself full, come down to
// UsableDescriptors of its limit.

// Child protocol words.
const (
	childReady   = "READY"
	childMetrics = "metrics"
	childFinal   = "final"
	childSteer   = "steer"   // "steer <k>": steer the group's new connections to child k (-1: spread)
	childFull    = "FULL"    // the child's open connections reached its high mark (sequential fill); "FULL <k>": and it steered new connections on to child k
	childSteered = "STEERED" // "STEERED <k>": the child has set the group's program to child k
	notMoved     = -2        // a FULL line without <k>
	childRoom    = "ROOM"    // they fell back to its low mark
	childQuiet   = "quiet"   // the whole server took no connection and no frame over the parent's last interval
	childBusy    = "busy"    // it did again (the state every child starts in)
)
