package linkkeysload

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/loadproof/loadproof/internal/linkkeys"
)

// Stage is the seed's failure class of one connection attempt.
type Stage uint8

const (
	// StageNone means the attempt succeeded.
	StageNone Stage = iota
	// StageConnect: socket creation, bind or connect failed (label tcp_connect_error).
	StageConnect
	// StageTLS: the TLS handshake failed, which includes the server's rate limiter closing the socket
	// before any TLS byte (label tls_handshake_error_or_server_reject); the client cannot tell the two
	// apart.
	StageTLS
	// StageTimeout: the whole attempt ran past the attempt timeout (label attempt_timeout).
	StageTimeout
)

// Label returns the seed's label of the class.
func (s Stage) Label() string {
	switch s {
	case StageConnect:
		return "tcp_connect_error"
	case StageTLS:
		return "tls_handshake_error_or_server_reject"
	case StageTimeout:
		return "attempt_timeout"
	}
	return "ok"
}

// RustName returns the class as Rust's `{:?}` prints the seed's FailureStage variant (Connect,
// TlsHandshake, Timeout), used in request-bench's setup error.
func (s Stage) RustName() string {
	switch s {
	case StageConnect:
		return "Connect"
	case StageTLS:
		return "TlsHandshake"
	case StageTimeout:
		return "Timeout"
	}
	return "None"
}

// Failure is why one attempt failed: the seed's class and a detail naming the cause where there is
// one (an errno name such as ECONNREFUSED, EOF, fingerprint_mismatch, a TLS alert).
type Failure struct {
	Stage  Stage
	Detail string
	Err    error
}

// Reason is the detailed reason key: "class:DETAIL", or the bare class when there is no detail
// (always for attempt_timeout).
func (f Failure) Reason() string {
	if f.Detail == "" || f.Stage == StageTimeout {
		return f.Stage.Label()
	}
	return f.Stage.Label() + ":" + f.Detail
}

func (f Failure) Error() string {
	if f.Err == nil {
		return f.Reason()
	}
	return f.Reason() + ": " + f.Err.Error()
}

// classify turns the error of one stage into a Failure. Deadline errors become attempt_timeout
// whatever the stage, as in the seed where one timeout wraps the whole attempt.
func classify(stage Stage, err error) Failure {
	if isTimeout(err) {
		return Failure{Stage: StageTimeout, Err: err}
	}
	return Failure{Stage: stage, Detail: Detail(err), Err: err}
}

func isTimeout(err error) bool {
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, syscall.ETIMEDOUT) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Detail names the cause of a connect or handshake error: the errno name (EADDRNOTAVAIL,
// ECONNREFUSED, ECONNRESET, EMFILE, EPIPE, ...), "EOF" for a stream closed during the handshake (how a
// server's rate limiter looks from here), "fingerprint_mismatch", "certificate_not_valid",
// "alert_<name>" for a TLS alert from the server, "timeout", or "other".
func Detail(err error) string {
	if err == nil {
		return ""
	}
	var fm *linkkeys.FingerprintMismatchError
	if errors.As(err, &fm) {
		return "fingerprint_mismatch"
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		if name := errnoName(errno); name != "" {
			return name
		}
		return "errno_" + strconv.FormatUint(uint64(errno), 10)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "EOF"
	}
	if isTimeout(err) {
		return "timeout"
	}
	var alert tls.AlertError
	if errors.As(err, &alert) {
		return "alert_" + strings.ReplaceAll(alert.Error(), " ", "_")
	}
	var rec tls.RecordHeaderError
	if errors.As(err, &rec) {
		return "not_tls"
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "server certificate is not valid"):
		return "certificate_not_valid"
	case strings.Contains(msg, "remote error: tls:"):
		// A received alert that crypto/tls reports as its unexported alert type.
		i := strings.Index(msg, "remote error: tls: ")
		return "alert_" + strings.ReplaceAll(msg[i+len("remote error: tls: "):], " ", "_")
	case strings.Contains(msg, "use of closed network connection"):
		return "closed"
	}
	return "other"
}
