package cli

import (
	"crypto/ed25519"
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/loadproof/loadproof/internal/capacity"
	"github.com/loadproof/loadproof/internal/evidence"
	"github.com/loadproof/loadproof/internal/report"
	"github.com/loadproof/loadproof/internal/result"
	"github.com/loadproof/loadproof/internal/search"
)

// provenance are the flags every command that writes a result or a bundle shares: the run ID of a
// run split by hand (--segment) and the key that signs what it writes.
type provenance struct {
	runID   string
	signKey string
}

// bindRunID adds --run-id (client commands that take --segment).
func (p *provenance) bindRunID(f *pflag.FlagSet) {
	f.StringVar(&p.runID, "run-id", "", "the run's `ID` (32 hex digits) for a run split by hand with --segment: give every segment the same one so report merges them; without --segment a fresh one is made")
}

// bindSignKey adds --sign-key.
func (p *provenance) bindSignKey(f *pflag.FlagSet, what string) {
	f.StringVar(&p.signKey, "sign-key", "", "sign "+what+" with the Ed25519 private key in `FILE` (from loadproof keygen); the detached signature is written beside it (docs/capacity.md, Signed evidence)")
}

// key reads the signing key, or nil when none is given; a bad key is a usage error before anything runs.
func (p *provenance) key() (ed25519.PrivateKey, error) {
	if p.signKey == "" {
		return nil, nil
	}
	k, err := evidence.ReadPrivateKey(p.signKey)
	if err != nil {
		return nil, usageError("--sign-key: %v", err)
	}
	return k, nil
}

// signer returns the function that signs a written result file, nil when no key is given.
func (p *provenance) signer() (func(path string) error, error) {
	k, err := p.key()
	if err != nil || k == nil {
		return nil, err
	}
	return func(path string) error { return evidence.SignFile(path, k) }, nil
}

// resolveRunID is the run ID a client's result carries: --run-id as given; a fresh one for a whole
// run started here; none for a segment given by hand without --run-id (its files then merge only
// when every segment is given) or for a coordinated worker (the coordinator's run names it).
func (p *provenance) resolveRunID(segment string, coordinated bool, log *slog.Logger) (string, error) {
	if err := result.ValidateRunID(p.runID); err != nil {
		return "", usageError("--run-id: %v", err)
	}
	switch {
	case p.runID != "":
		return p.runID, nil
	case coordinated:
		return "", nil
	case segment != "":
		log.Warn("--segment without --run-id: the result carries no run ID, so `report` merges it only with every other segment; give all segments one --run-id (any 32 hex digits, e.g. from a first run's result)")
		return "", nil
	}
	return result.NewRunID(), nil
}

// verifyOptions wires the recomputation of capacity's checks and the result readers into
// evidence.Verify.
func verifyOptions(key ed25519.PublicKey) evidence.VerifyOptions {
	return evidence.VerifyOptions{Key: key, Recompute: capacity.Recompute, ReadResult: readAnyResult}
}

// readAnyResult reads a result file of either harness as report does (report.Parse).
func readAnyResult(path string, b []byte) error {
	f, err := report.Parse(path, b)
	if err != nil {
		return err // names the file
	}
	if !f.IsResult() {
		return fmt.Errorf("%s is a %s file, neither a LinkKeys client result nor a Keycast results file", path, f.Kind)
	}
	return nil
}

// newVerifyCmd is `loadproof verify BUNDLE|RESULT…`.
func newVerifyCmd(env *Env) *cobra.Command {
	var keyPath string
	c := &cobra.Command{
		Use:   "verify BUNDLE|RESULT...",
		Short: "Verify evidence bundles and result files: manifest hashes, recomputed checks and verdict, signature",
		Long: "verify checks each capacity evidence bundle (its directory or evidence.json): every file against\n" +
			"manifest.json's SHA-256, every check, phase outcome and the verdict recomputed from the phase results\n" +
			"files and the plan, and the manifest's signature (evidence.sig) when there is one. A result file is\n" +
			"checked to read as a result and against its signature (FILE.sig) when there is one.\n" +
			"With --key PUB a signature must exist and be made by that key; without it a signature is checked\n" +
			"against the key it carries, whose fingerprint is printed (that proves the files unchanged since\n" +
			"that key signed them, not who holds the key).\n\n" +
			"Exit status: 0 everything holds; 1 something does not (each finding listed); 2 bad flags or key.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var key ed25519.PublicKey
			if keyPath != "" {
				k, err := evidence.ReadPublicKey(keyPath)
				if err != nil {
					return usageError("verify: --key: %v", err)
				}
				key = k
			}
			failed := 0
			for _, p := range args {
				f := verifyAny(p, key)
				printFindings(env, f)
				if !f.OK() {
					failed++
				}
			}
			if failed > 0 {
				return &ExitError{Code: ExitFailure, Err: fmt.Errorf("verify: %d of %d did not verify", failed, len(args))}
			}
			return nil
		},
	}
	c.Flags().StringVar(&keyPath, "key", "", "the Ed25519 public key `FILE` (PREFIX.pub from loadproof keygen) that must have signed each file")
	return c
}

func printFindings(env *Env, f *evidence.Findings) {
	what := "result"
	if f.Bundle {
		what = "bundle"
	}
	verdict := "VERIFIED"
	if !f.OK() {
		verdict = "TAMPERED or unverifiable"
	}
	fmt.Fprintf(env.Stdout, "%s %s: %s\n", what, f.Path, verdict)
	for _, p := range f.Problems {
		fmt.Fprintf(env.Stdout, "  FAIL %s\n", p)
	}
	for _, h := range f.Held {
		fmt.Fprintf(env.Stdout, "  ok   %s\n", h)
	}
}

// newKeygenCmd is `loadproof keygen --out PREFIX`.
func newKeygenCmd(env *Env) *cobra.Command {
	var out string
	c := &cobra.Command{
		Use:   "keygen --out PREFIX",
		Short: "Make an Ed25519 key pair for signing evidence and results",
		Long: "keygen writes PREFIX.key (the private key, PEM PKCS #8, mode 0600) and PREFIX.pub (the public key,\n" +
			"PEM PKIX) and prints the public key's fingerprint (SHA-256 of the raw key, hex). Give PREFIX.key to\n" +
			"--sign-key and PREFIX.pub to `verify --key`. Existing files are never replaced.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usageError("keygen: --out PREFIX is required")
			}
			fp, err := evidence.WriteKeyPair(out, nil)
			if err != nil {
				return &ExitError{Code: ExitFailure, Err: err}
			}
			fmt.Fprintf(env.Stdout, "wrote %s.key (private, 0600) and %s.pub\nfingerprint %s\n", out, out, fp)
			return nil
		},
	}
	c.Flags().StringVar(&out, "out", "", "path `PREFIX` of the key files (PREFIX.key, PREFIX.pub)")
	return c
}

// verifyAny verifies a search bundle (search.Verify) or anything else evidence.Verify takes.
func verifyAny(p string, key ed25519.PublicKey) *evidence.Findings {
	if dir, ok := search.IsBundle(p); ok {
		return search.Verify(dir, evidence.VerifyOptions{Key: key, ReadResult: readAnyResult})
	}
	return evidence.Verify(p, verifyOptions(key))
}
