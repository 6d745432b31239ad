package linkkeys

import "slices"

// Arithmetic over METRICS readings: the derived counts clients compare with their own, and the sum
// of several processes' readings.

// Pending returns the connections accepted but not yet through admission:
// AcceptedConnections minus every outcome counter (EstablishedTotal, the two
// handshake failures and the four shed counters). On a server whose
// accounting is exact it is HandshakesInProgress, and 0 once the server is
// quiet.
func (m MetricsLine) Pending() int64 {
	done := m.EstablishedTotal + m.HandshakeRejections + m.HandshakeTimeouts + m.ShedConnectionLimit +
		m.ShedHandshakePerSource + m.ShedHandshakeOverflow + m.ShedHandshakeGlobal
	return int64(m.AcceptedConnections) - int64(done)
}

// Closed returns the sum of the closed_* counters: established connections
// that have ended. EstablishedTotal = EstablishedConnections + Closed() on
// this server.
func (m MetricsLine) Closed() uint64 {
	return m.ClosedByPeer + m.ClosedOversizedFrame + m.ClosedMalformedRequest + m.ClosedIdleTimeout + m.ClosedIOTimeout +
		m.ClosedSlowFrameBody + m.ClosedFrameBudget + m.ClosedOversizedResponse + m.ClosedShutdown
}

// Admitted returns the server's count of connections that passed admission
// (the limiter), when the server reports one (an appended "admitted" or
// "handshakes_admitted" field), and otherwise accepted minus the sheds, which
// is the same number for a server whose accounting holds.
func (m MetricsLine) Admitted() uint64 {
	for _, k := range []string{"admitted", "handshakes_admitted", "admitted_connections"} {
		if v, ok := m.Extra[k]; ok {
			return uint64(v)
		}
	}
	shed := m.ShedConnectionLimit + m.ShedHandshakePerSource + m.ShedHandshakeOverflow + m.ShedHandshakeGlobal
	if shed > m.AcceptedConnections {
		return 0
	}
	return m.AcceptedConnections - shed
}

// HandshakesCompleted returns the server's cumulative count of completed TLS
// handshakes, when it reports one (established_total, or a numeric field of
// another common name in Extra); ok is false otherwise
// (established_connections is a gauge and cannot stand in).
func (m MetricsLine) HandshakesCompleted() (uint64, bool) {
	// Extra first: a reading from another server, or a result file written
	// before established_total was a field of its own.
	for _, k := range []string{"handshakes_completed", "established_total", "established", "handshakes_ok"} {
		if v, ok := m.Extra[k]; ok {
			return uint64(v), true
		}
	}
	if m.Has("established_total") {
		return m.EstablishedTotal, true
	}
	return 0, false
}

// SumMetricsLines adds several processes' readings into one, as the
// --processes parent reports them: every counter and gauge is summed,
// process_rss_bytes is the sum of the known values (nil when none is known),
// the server host's counters (Host fields) are the largest of the readings,
// since each process reads the same host, a field absent from any reading
// is absent from the sum, the per-prefix
// counters are summed prefix by prefix (in the order the prefixes first
// appear), and Extra is dropped. Label and ElapsedSecs are left zero for the
// caller to set.
func SumMetricsLines(lines ...MetricsLine) MetricsLine {
	var t MetricsLine
	var absent []string
	for _, m := range lines {
		for i := range m.Sources {
			c := &m.Sources[i]
			sum := t.sourceOrAdd(c.Name)
			for _, f := range sourceFields {
				*f.ptr(sum) += *f.ptr(c)
			}
		}
		for _, f := range metricsFields {
			v, ok := f.Value(&m)
			switch {
			case ok && f.ptr == nil:
				if t.ProcessRSSBytes != nil {
					v += *t.ProcessRSSBytes
				}
				t.ProcessRSSBytes = &v
			case ok && f.Host:
				*f.ptr(&t) = max(*f.ptr(&t), v)
			case ok:
				*f.ptr(&t) += v
			case f.Appended && !slices.Contains(absent, f.Name):
				absent = append(absent, f.Name)
			}
		}
	}
	for _, f := range metricsFields { // keep line order
		if slices.Contains(absent, f.Name) {
			t.Absent = append(t.Absent, f.Name)
		}
	}
	return t
}

// HostTCPGrowth returns how much each of the server host's TCP counters grew from before to m, in
// [HostTCPFields] order (0 for one that went back: a server restarted in between); ok is false
// unless both readings carry every one of them.
func (m MetricsLine) HostTCPGrowth(before MetricsLine) (growth [len(HostTCPFields)]uint64, ok bool) {
	for i, name := range HostTCPFields {
		f, _ := LookupMetricsField(name)
		a, aok := f.Value(&m)
		b, bok := f.Value(&before)
		if !aok || !bok {
			return growth, false
		}
		if a > b {
			growth[i] = a - b
		}
	}
	return growth, true
}
