//go:build !linux

package linkkeysserver

import "errors"

// poller is Linux-only (epoll); elsewhere connections are never parked and
// each established connection keeps its goroutine.
type poller struct{ done chan struct{} }

func newPoller(*Server) (*poller, error) {
	return nil, errors.New("linkkeysserver: parking idle connections needs epoll (Linux); every connection keeps a goroutine")
}

func (*poller) arm(*conn) error       { return errors.New("linkkeysserver: no poller") }
func (*poller) disarm(*conn)          {}
func (*poller) wheelAdd(*conn, int64) {}
func (*poller) wheelRemove(*conn)     {}
func (*poller) kick()                 {}
