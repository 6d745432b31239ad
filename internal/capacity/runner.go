package capacity

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/loadproof/loadproof/internal/keycastload"
	"github.com/loadproof/loadproof/internal/keycastresult"
)

// KeycastloadRunner returns the Runner that runs phases with keycastload.Run, as upstream's
// capacity command calls its runner (docs/protocol-keycast.md, Execution): requests 0, the phase's duration, ramp-up,
// scenario and method, the plan's seed, report interval clamp(duration, 1, 5) s, and the plan's stop
// conditions as live stop conditions. progress receives keycastload's progress lines; httpTimeout 0
// keeps keycastload's default; tls says how the target's certificate is verified.
func KeycastloadRunner(progress io.Writer, logger *slog.Logger, httpTimeout time.Duration, tls keycastload.TLSOptions) Runner {
	return KeycastRunnerWith(keycastload.Run, progress, logger, httpTimeout, tls)
}

// KeycastRunnerWith is KeycastloadRunner with another function in keycastload.Run's place (a
// coordinator that spreads each phase over many machines).
func KeycastRunnerWith(runFn func(context.Context, keycastload.RunConfig) (*keycastresult.Results, error),
	progress io.Writer, logger *slog.Logger, httpTimeout time.Duration, tls keycastload.TLSOptions) Runner {
	return func(ctx context.Context, run PhaseRun) (*keycastresult.Results, error) {
		ph := run.Phase
		res, err := runFn(ctx, keycastload.RunConfig{
			URL:            run.URL,
			Concurrency:    ph.Concurrency,
			Requests:       0,
			Duration:       time.Duration(ph.DurationSeconds) * time.Second,
			RampUp:         time.Duration(ph.RampUpSeconds) * time.Second,
			Scenario:       ph.Scenario,
			Method:         ph.Method,
			Users:          run.Users,
			UsersFile:      run.UsersFile,
			ReportInterval: run.ReportInterval,
			Seed:           run.Seed,
			Stop: &keycastload.StopConditions{
				MaxUnintentionalErrorRate: run.Stop.MaxUnintentionalErrorRate,
				MaxLatencyP95Ms:           run.Stop.MaxLatencyP95Ms,
				Window:                    run.Stop.Window,
				MinRequests:               run.Stop.MinRequests,
			},
			Progress:    progress,
			Logger:      logger,
			HTTPTimeout: httpTimeout,
			TLS:         tls,
		})
		if err != nil {
			return nil, &SafeError{Msg: describeRunError(err), Err: err}
		}
		return res, nil
	}
}

// describeRunError names the kind of failure without quoting the engine's message, which may carry
// text from the server.
func describeRunError(err error) string {
	var op *net.OpError
	var dns *net.DNSError
	var cert *tls.CertificateVerificationError
	var user *keycastload.UserError
	switch {
	case errors.Is(err, keycastload.ErrNoUsers):
		return "the load engine found no users to send requests as"
	case errors.As(err, &user):
		return fmt.Sprintf("user %d of the users file has an unusable %s (the log names the problem); nothing was sent", user.Index, user.Field)
	case errors.As(err, &cert):
		return "the target's TLS certificate could not be verified (a private CA needs --ca-cert)"
	case errors.As(err, &dns), errors.As(err, &op):
		return "the target cannot be reached"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "the phase was cancelled before it started"
	default:
		return "the load engine could not run the phase"
	}
}
