// Package capacity runs Keycast capacity-readiness profiles: a plan declares six phases (ramp, spike,
// soak, recovery, rollout, scale-down, in that order) with their limits before anything runs, and the
// run turns them into an evidence bundle that says, check by check, whether the target met them.
//
// The plan schema, the validation rules and their messages, the checks and the evidence format follow
// the newest upstream Keycast tool (reference keycast.md §2, commit a8d40c9). The plan itself (types,
// parser, validation, host rules) lives in the sub-package plan, away from the load engine, and is
// re-exported here under the same names.
//
//   - ParsePlan reads a plan strictly: unknown or duplicate fields, missing fields, wrong types and
//     trailing data are all rejected, every problem at once.
//   - Validate applies the §2.3 rules, again reporting every problem at once, and decides the
//     execution environment ("local" or "authorized-non-production") from the host rules of §2.8.
//   - PhaseChecks and PhaseOutcome are the §2.5 checks and the continue/stop rule; Conclude is §2.7.
//   - Execute validates, creates the output directory, runs each phase through keycastload.Run with
//     the plan's absolute stop conditions as live stop conditions, and writes the bundle.
//
// Beyond upstream, the bundle (written by Execute, checked by VerifyBundle) carries per-phase results files, the machine record,
// the reasons certification is not ready, why the run ended early (a phase error, a live stop
// condition, or SIGINT/SIGTERM), and a manifest.json with the SHA-256 of every file. Error text that
// reaches the bundle is rebuilt from a fixed vocabulary (see ScrubError), so the evidence never holds
// tokens, passwords, request bodies or raw server errors.
package capacity
