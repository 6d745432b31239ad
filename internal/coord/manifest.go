package coord

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/loadproof/loadproof/internal/atomicfile"
	"github.com/loadproof/loadproof/internal/boundedfile"
	"github.com/loadproof/loadproof/internal/machine"
	"github.com/loadproof/loadproof/internal/textclip"
)

// ManifestFormat names the coordination manifest's format.
const ManifestFormat = "loadproof.coordination/v1"

// Manifest is the coordination manifest written beside the merged result: every worker's record
// (machine, clock offset, state, last snapshot, the messages it refused), every task with its
// start instant and the measured start skew, the tasks workers refused, the messages the
// coordinator refused, and a lost worker, if any.
type Manifest struct {
	Format string `json:"format"`
	Run    string `json:"run"`
	// InsecureUnsigned records a run whose control messages were not signed (--insecure-unsigned).
	InsecureUnsigned bool `json:"insecure_unsigned,omitempty"`
	// Refused counts the control messages the coordinator refused, by reason (replay,
	// bad-signature, stale, duplicate, …); each worker's own counts are in its record.
	Refused map[string]int64 `json:"refused_messages"`
	// TaskRefusals are the tasks a worker refused, with its reason.
	TaskRefusals []TaskRefusal `json:"worker_refusals"`
	// Partial says a merged result lacks a worker's part.
	Partial     string            `json:"partial,omitempty"`
	Command     []string          `json:"command"`
	NATS        string            `json:"nats"`
	Embedded    bool              `json:"embedded_nats"`
	Transport   string            `json:"result_transport"`
	StartedAt   time.Time         `json:"started_at"`
	EndedAt     time.Time         `json:"ended_at"`
	ExitCode    int               `json:"exit_code"`
	Error       string            `json:"error,omitempty"`
	Coordinator machine.Record    `json:"coordinator_machine"`
	Workers     []WorkerInfo      `json:"workers"`
	Tasks       []TaskRecord      `json:"tasks"`
	Lost        *LostRecord       `json:"lost_worker,omitempty"`
	Flags       map[string]string `json:"flags,omitempty"`
}

// Manifest assembles the session's coordination manifest: command is the client command spread,
// startedAt when the session began, exitCode and runErr how it ended. The caller adds the flags.
func (c *Coordinator) Manifest(command []string, startedAt time.Time, exitCode int, runErr error) Manifest {
	m := Manifest{Format: ManifestFormat, Run: c.Run(), Command: command, NATS: c.URL(), Embedded: c.emb != nil,
		Transport: c.Transport(), StartedAt: startedAt, EndedAt: time.Now(), ExitCode: exitCode, Workers: c.Workers(), Tasks: c.Tasks(),
		Coordinator: machine.Collect(), Refused: c.Refusals(), TaskRefusals: c.TaskRefusals(), InsecureUnsigned: c.cfg.Secret == ""}
	if p := c.Partial(); p != nil {
		m.Partial = p.Error()
	}
	if lost := c.Lost(); lost != nil {
		m.Lost = RecordLost(lost)
	}
	if runErr != nil {
		m.Error = runErr.Error()
	}
	return m
}

// WriteManifest writes m to path (indented JSON, replaced atomically).
func WriteManifest(path string, m Manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("coord: encoding the coordination manifest: %w", err)
	}
	return atomicfile.Write(path, append(b, '\n'), 0o644)
}

// manifestFile is the bounded read of a coordination manifest: every worker's record and last
// snapshot, far below the cap even for thousands of workers.
var manifestFile = boundedfile.Kind{Name: "coordination manifest", Max: 64 << 20}

// ReadManifest reads the coordination manifest at path (WriteManifest's file, `loadproof
// coordinate --manifest`): ParseManifest of its bytes, read within a size cap.
func ReadManifest(path string) (Manifest, error) {
	b, err := boundedfile.Read(path, manifestFile)
	if err != nil {
		return Manifest{}, err
	}
	m, err := ParseManifest(b)
	if err != nil {
		return Manifest{}, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// ParseManifest reads a coordination manifest as WriteManifest writes it; a file of another
// format is refused with a message saying which it is.
func ParseManifest(b []byte) (Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return Manifest{}, fmt.Errorf("coord: reading a coordination manifest: %w", err)
	}
	if m.Format != ManifestFormat {
		return Manifest{}, fmt.Errorf("coord: reading a coordination manifest: format %q, want %q; give the file `loadproof coordinate --manifest` wrote", textclip.String(m.Format, 60), ManifestFormat)
	}
	return m, nil
}
