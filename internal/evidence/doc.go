// Package evidence owns the capacity evidence bundle as a file format: the model a reader draws
// from evidence.json (Evidence, Phase, Check, with Phase.Verdict the one place a phase's verdict
// word is decided), the manifest that hashes every member file (WriteManifest, VerifyManifest),
// Ed25519 keys and detached signatures of a manifest or of a result file (GenerateKey, Sign,
// ReadSignature), and Verify, which puts manifest, signature and a harness's recomputation of the
// checks together into one list of findings.
//
// Dependency direction: evidence imports no harness and no runner. Package capacity, which writes
// bundles, imports evidence (manifest, signature); the recomputation of checks from phase results
// lives in capacity, and reaches Verify as a function (VerifyOptions.Recompute) that the command
// line wires in. Reports read bundles through this package, never through capacity.
package evidence
