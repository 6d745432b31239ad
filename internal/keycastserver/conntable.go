package keycastserver

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Making room at the connection cap.
//
// A cap that only sheds new connections hands the server to whoever fills it first: clients
// that send a request head and never its body hold every slot until the body timeout, and then
// again with the next wave. So at the cap acceptLoop first closes the connection that has made
// no progress the longest (stalled in its request head or body, or idle between requests), as
// nginx closes idle keep-alive connections when it runs out of them, and sheds the new
// connection only when every connection is being served (a request read, being processed, or
// waiting for a CPU slot).
//
// connTable keeps every open client connection in one list ordered by when it last made
// progress, stalest first. Moving a connection to the tail takes the table's lock, so the
// serving goroutines do not do it on every request: a connection records its state in an
// atomic of its own, and moves itself to the tail only when its place is more than refileEvery
// old (so the order is exact to within refileEvery). Eviction looks at the head of the list:
// a connection being served there is moved to the tail (being served is progress), and the
// first one that is waiting on its client is closed; at most evictScan are looked at, so an
// accept costs O(1) however many connections are open.

// Connection states (connNode.state).
const (
	// csHead: accepted, or part of a request head read; waiting for the rest of the head.
	csHead int32 = iota
	// csBody: a request's body is being read from the client.
	csBody
	// csIdle: between requests (keep-alive), waiting for the next head.
	csIdle
	// csBusy: a request is being processed or answered; never evicted.
	csBusy
	// csGone: evicted or closed.
	csGone
)

// evictReasons are the reason labels of keycast_http_connections_evicted_total, by state.
var evictReasons = [...]string{csHead: "stalled_head", csBody: "stalled_body", csIdle: "idle"}

const (
	// refileEvery is how stale a connection's place in the table may get before a sign of
	// progress moves it to the tail: the precision of "made no progress the longest".
	refileEvery = 250 * time.Millisecond
	// evictScan bounds the connections one eviction looks at.
	evictScan = 64
)

// connNode is a connection's entry in a connTable.
type connNode struct {
	prev, next *connNode // in the table's list; nil when not in it (under connTable.mu)
	src        netip.Addr
	state      atomic.Int32
	filed      atomic.Int64 // the table's clock when the node was last moved to the tail
	owner      *countedConn // nil in unit tests
}

// connTable is the list of open connections by last progress, and the per-source counts.
type connTable struct {
	epoch     time.Time // the clock's zero
	perSource int       // most connections per source; 0: no limit

	mu       sync.Mutex
	root     connNode // sentinel: root.next is the stalest
	n        int
	bySource map[netip.Addr]int
}

func newConnTable(perSource int) *connTable {
	t := &connTable{epoch: time.Now(), perSource: perSource}
	t.root.prev, t.root.next = &t.root, &t.root
	if perSource > 0 {
		t.bySource = make(map[netip.Addr]int)
	}
	return t
}

// clock is the table's monotonic time of now.
func (t *connTable) clock(now time.Time) int64 { return int64(now.Sub(t.epoch)) }

// add files n at the tail in state st. With a per-source limit it refuses (false) a node
// whose source already has that many connections.
func (t *connTable) add(n *connNode, st int32, now int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.bySource != nil {
		if t.bySource[n.src] >= t.perSource {
			return false
		}
		t.bySource[n.src]++
	}
	n.state.Store(st)
	n.filed.Store(now)
	t.linkTailLocked(n)
	t.n++
	return true
}

// remove takes n out of the table, if it is still in it.
func (t *connTable) remove(n *connNode) {
	t.mu.Lock()
	if n.next != nil {
		t.unlinkLocked(n)
	}
	t.mu.Unlock()
}

// progress records that n moved forward at now, moving it to the tail when its place is more
// than refileEvery old. It costs an atomic load when it does not.
func (t *connTable) progress(n *connNode, now int64) {
	if now-n.filed.Load() < int64(refileEvery) {
		return
	}
	t.mu.Lock()
	if n.next != nil {
		t.moveTailLocked(n, now)
	}
	t.mu.Unlock()
}

// evict takes the connection that has made no progress the longest and is not being served
// out of the table, marking it csGone, and returns it with the reason label; nil when the
// evictScan stalest are all being served.
func (t *connTable) evict(now int64) (*connNode, string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.root.next
	for i := 0; i < evictScan && n != &t.root; i++ {
		next := n.next
		switch st := n.state.Load(); st {
		case csHead, csBody, csIdle:
			if n.state.CompareAndSwap(st, csGone) {
				t.unlinkLocked(n)
				return n, evictReasons[st]
			}
			next = n // its state changed just now: look again
		case csBusy:
			t.moveTailLocked(n, now)
		}
		n = next
	}
	return nil, ""
}

// len is the number of connections in the table.
func (t *connTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}

func (t *connTable) linkTailLocked(n *connNode) {
	last := t.root.prev
	n.prev, n.next = last, &t.root
	last.next = n
	t.root.prev = n
}

func (t *connTable) moveTailLocked(n *connNode, now int64) {
	n.filed.Store(now)
	if t.root.prev == n {
		return
	}
	n.prev.next, n.next.prev = n.next, n.prev
	t.linkTailLocked(n)
}

func (t *connTable) unlinkLocked(n *connNode) {
	n.prev.next, n.next.prev = n.next, n.prev
	n.prev, n.next = nil, nil
	t.n--
	if t.bySource != nil {
		if c := t.bySource[n.src] - 1; c > 0 {
			t.bySource[n.src] = c
		} else {
			delete(t.bySource, n.src)
		}
	}
}

// sourceOf is the address a per-source limit counts a connection under: its IPv4 address, or
// the /64 of an IPv6 one (one host commonly holds a whole /64).
func sourceOf(c net.Conn) netip.Addr {
	var a netip.Addr
	switch ra := c.RemoteAddr().(type) {
	case nil:
		return netip.Addr{}
	case *net.TCPAddr:
		a = ra.AddrPort().Addr().Unmap()
	default:
		ap, err := netip.ParseAddrPort(ra.String())
		if err != nil {
			return netip.Addr{}
		}
		a = ap.Addr().Unmap()
	}
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.Addr()
	}
	return a
}

// to moves n from state from to state to; false when n is in another state (evicted, say).
func (n *connNode) to(from, to int32) bool {
	return n != nil && n.state.CompareAndSwap(from, to)
}

// busy marks n as being served, from whatever state it waited in; false when it was evicted.
func (n *connNode) busy() bool {
	if n == nil {
		return true
	}
	for {
		st := n.state.Load()
		switch st {
		case csBusy:
			return true
		case csGone:
			return false
		}
		if n.state.CompareAndSwap(st, csBusy) {
			return true
		}
	}
}

// The net/http side. net/http reads the head and calls the handler, which reads the body; a
// connection is waiting on its client while net/http waits for a head (ConnState idle, then
// countedConn.Read starts csHead) and while the handler is inside a body Read (trackedBody);
// from the head's end to the answer's (ConnState active to idle) it is being served.

// connKey is the request context key of a request's *countedConn.
type connKey struct{}

// connContext is http.Server.ConnContext: it puts the connection's countedConn in the context,
// where trackBodies finds it.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if cc := countedOf(c); cc != nil {
		return context.WithValue(ctx, connKey{}, cc)
	}
	return ctx
}

// trackConnState is http.Server.ConnState: a connection is being served from the end of a
// request head (StateActive) until net/http waits for the next one (StateIdle, progress).
func trackConnState(c net.Conn, st http.ConnState) {
	cc := countedOf(c)
	if cc == nil {
		return
	}
	switch st {
	case http.StateActive:
		cc.node.busy()
	case http.StateIdle:
		if !cc.node.to(csBusy, csIdle) {
			cc.node.to(csBody, csIdle) // after a body net/http drained (trackBodies)
		}
		cc.s.conns.progress(&cc.node, cc.s.conns.clock(time.Now()))
	}
}

// trackBodies marks a connection as waiting on its client while its handler reads the body,
// and after the handler when it left some of the body unread: net/http then reads the rest
// (up to 256 KiB) before it answers, to keep the connection, and that wait is the client's too
// (a handler that refuses a request early, say a register without Origin, would otherwise
// leave a stalled body looking served).
func trackBodies(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cc, _ := r.Context().Value(connKey{}).(*countedConn)
		if cc == nil || r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		b := &trackedBody{ReadCloser: r.Body, node: &cc.node}
		r.Body = b
		h.ServeHTTP(w, r)
		if !b.eof && (r.ContentLength < 0 || b.read < r.ContentLength) {
			cc.node.to(csBusy, csBody)
		}
	})
}

// trackedBody is a request body whose Read marks its connection csBody while it waits.
type trackedBody struct {
	io.ReadCloser
	node *connNode
	read int64 // bytes read
	eof  bool  // the whole body was read
}

func (b *trackedBody) Read(p []byte) (int, error) {
	b.node.to(csBusy, csBody)
	n, err := b.ReadCloser.Read(p)
	b.node.to(csBody, csBusy)
	b.read += int64(n)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}
