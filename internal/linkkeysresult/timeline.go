package linkkeysresult

// The connections command's timeline: its intervals span the ramp, the hold and the close. Beside
// the attempts of each interval (its counts by AttemptClasses; success is a connection
// established), they carry the connections held (a gauge read as the interval closes) and the held
// connections that ended in it, by how (counters). Across the segments of a run the gauge sums, as
// the segments hold at the same instants; over a run the counters add up to the connections
// established: closed by the server, ended in error, ended unseen, and closed by the client at the
// end.
const (
	// GaugeHeld is the connections established and not yet ended at the interval's close.
	GaugeHeld = "held"
	// CounterClosedByServer counts held connections the server closed (a FIN), as the client saw
	// them end during the hold.
	CounterClosedByServer = "closed_by_server"
	// CounterClosedError counts held connections that ended in an error (an RST) during the hold.
	CounterClosedError = "closed_error"
	// CounterClosedUnseen counts held connections found ended only by the count at the end of the
	// hold (where they cannot be watched: off Linux).
	CounterClosedUnseen = "closed_unseen"
	// CounterClosedByClient counts the connections still held at the end of the hold, which the
	// client then closes.
	CounterClosedByClient = "closed_by_client"
)

// ConnectionsCounters lists the connections command's interval counters in their engine order.
var ConnectionsCounters = []string{CounterClosedByServer, CounterClosedError, CounterClosedUnseen, CounterClosedByClient}
