// Package coord spreads one load run over many machines: a coordinator and N workers that talk
// over NATS (an existing server or cluster, or one the coordinator embeds), so the run's result or
// evidence bundle is exactly what one very large machine would have written.
//
// The division of labour follows the engine's segments (k6's execution segments): worker i of N
// runs segment i/N of the client command, whose counts, rates, request numbers and users are
// disjoint and together complete. The coordinator never generates load; it
//
//   - waits for N workers to join (bounded; the error names the missing indexes),
//   - measures each worker's clock offset (NTP-style, the lowest-RTT of several pings) and starts
//     every worker at one instant, given to each in its own clock,
//   - merges the workers' one-second interval snapshots exactly as they arrive, prints live
//     progress and judges the run's stop conditions on the merged window, broadcasting an abort
//     that every worker obeys at once,
//   - collects the final results (JetStream object store where the server has JetStream, chunked
//     request/reply otherwise) and merges them, with every worker's machine record, into one file,
//   - fails the run, naming the worker, when a worker stops reporting for LostAfter (3 s), keeping
//     the partial evidence of the others.
//
// A worker runs only task specifications, never a shell command: a Keycast run as a typed
// KeycastSpec (an allow list of fields, decoded strictly and validated once here, run through
// keycastload), or a LinkKeys client's `linkkeys worker --spec` with no other flag. It checks
// everything the task will reach against its own host authorization (package hostrule: a URL's
// host, the one TCP address a LinkKeys spec dials, its metrics location), takes a task only when it is
// newer than the last and starts in the future, and stops its load within WatchdogAfter (plus a
// one-second ping) when the coordinator goes quiet.
//
// Every message is sealed (signer): bound to the run (a random run identifier handed out in the
// join exchange), to its sender and that sender's sequence number and clock, with an HMAC-SHA256
// under the run secret over the subject, those headers, the chunk headers and the body. Replays,
// other runs' messages, stale and forged ones are refused and counted (Coordinator.Refusals). A
// coordinator or worker without a secret refuses to start on a NATS the coordinator does not embed
// unless told InsecureUnsigned. The embedded server gives the run per-run users with NATS subject
// permissions (EmbeddedConfig.Run). Result chunks are bounded (MaxResultBytes), the first good
// result of a worker is kept, and a merge that lacks a worker is partial (Coordinator.Partial).
//
// The wire protocol (subjects, messages, signatures) is in proto.go, the commands a task may run
// in commands.go, the roster (joins, clocks,
// watch) in roster.go, task dispatch and records in tasks.go, result transfer in transfer.go;
// docs/distributed.md is the user's guide. The coordinator reaches the client commands through the
// cli package's cobra tree: the cli builds that tree with a Runner (runner.go) whose Spread is the
// Coordinator, and hands it to each client command's constructor, so a command that consults its
// Runner can be spread; a worker runs a LinkKeys task's command in a tree whose Runner carries the
// task's Share (WorkerConfig.Exec). Nothing travels in a context but the engine's interval
// observer, through which every engine run hands out its snapshots. Refused tasks, each worker's refused-message
// counts and duplicate results are kept for the coordination manifest (TaskRefusals,
// WorkerInfo.Refused, Refusals).
package coord
