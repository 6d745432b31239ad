// Package capacity runs capacity-readiness profiles of either harness: a plan declares its phases
// with their limits before anything runs, and the run turns them into an evidence bundle that says,
// check by check, whether the target met them. A Keycast plan declares six HTTP phases (ramp,
// spike, soak, recovery, rollout, scale-down, in that order); a LinkKeys plan declares ordered
// phases, each a workload of the combined command's TCP streams against a server started (or
// verified) with a declared environment profile (ExecuteLinkKeys, linkkeys.go).
//
// Both run on one executor (harness.go): a harness lists its phases, runs one when asked (a
// PhaseRunner returning the phase's results, their envelope and named metrics) and says which
// checks judge it; checks are CheckSpecs evaluated by metric name. The phase loop, phase errors,
// live stops, signals, the continue/stop rule, the verdict and its blockers, the bundle, the
// manifest and the mapping of the outcome to an error are shared.
//
// The plan schema, the validation rules and their messages, the checks and the evidence format
// follow the newest upstream Keycast tool (commit a8d40c9; docs/protocol-keycast.md, Capacity
// profiles). The plan itself (types, parser, validation, host rules) lives in the sub-package plan,
// away from the load engine, and is re-exported here under the same names.
//
//   - ParsePlan reads a plan strictly: unknown or duplicate fields, missing fields, wrong types and
//     trailing data are all rejected, every problem at once.
//   - Validate applies upstream's validation rules, again reporting every problem at once, and
//     decides the execution environment ("local" or "authorized-non-production") from the host
//     rules.
//   - PhaseChecks and PhaseOutcome are upstream's checks and continue/stop rule; Conclude is its
//     verdict (passed, certification_ready).
//   - Execute validates, creates the output directory, runs each phase through keycastload.Run with
//     the plan's absolute stop conditions as live stop conditions, and writes the bundle.
//
// Beyond upstream, the bundle (written by Execute, checked by VerifyBundle) carries per-phase results files, the machine record,
// the reasons certification is not ready, why the run ended early (a phase error, a live stop
// condition, or SIGINT/SIGTERM), and a manifest.json with the SHA-256 of every file. Error text that
// reaches the bundle is rebuilt from a fixed vocabulary (see ScrubError), so the evidence never holds
// tokens, passwords, request bodies or raw server errors.
//
// The bundle's file format (manifest, signature, the reading model) is package evidence's; this
// package writes through it (evidence.Seal, with Options.SignKey the manifest is signed) and owns
// the check rules, so the recomputation of a written bundle's checks and verdict is here too
// (Recompute), handed to evidence.Verify by the command line.
package capacity
