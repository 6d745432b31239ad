package capacity

import "github.com/loadproof/loadproof/internal/capacity/plan"

// The plan API lives in package plan (so fuzzing the parser does not instrument the load engine);
// these names make it available here too.

// Plan types.
type (
	Plan            = plan.Plan
	Revisions       = plan.Revisions
	Objectives      = plan.Objectives
	StopConditions  = plan.StopConditions
	Phase           = plan.Phase
	Shedding        = plan.Shedding
	Platform        = plan.Platform
	Kind            = plan.Kind
	Environment     = plan.Environment
	ValidateOptions = plan.ValidateOptions
	Problem         = plan.Problem
	ParseError      = plan.ParseError
)

// Platforms, kinds and environments.
const (
	PlatformCloudRun           = plan.PlatformCloudRun
	PlatformGKE                = plan.PlatformGKE
	KindRamp                   = plan.KindRamp
	KindSpike                  = plan.KindSpike
	KindSoak                   = plan.KindSoak
	KindRecovery               = plan.KindRecovery
	KindRollout                = plan.KindRollout
	KindScaleDown              = plan.KindScaleDown
	EnvLocal                   = plan.EnvLocal
	EnvAuthorizedNonProduction = plan.EnvAuthorizedNonProduction
	MaxPlanSize                = plan.MaxPlanSize
	MaxPhaseConcurrency        = plan.MaxPhaseConcurrency
)

var (
	// RequiredKinds is the exact phase sequence a plan must declare.
	RequiredKinds = plan.RequiredKinds
	// RefusedProductionHosts are always refused as targets.
	RefusedProductionHosts = plan.RefusedProductionHosts
)

// ParsePlan decodes a plan strictly; see plan.ParsePlan.
func ParsePlan(b []byte) (*Plan, error) { return plan.ParsePlan(b) }

// ReadPlan reads and parses a plan file; see plan.ReadPlan.
func ReadPlan(path string) (*Plan, error) { return plan.ReadPlan(path) }

// Validate applies every validation rule and returns the execution environment; see plan.Validate.
func Validate(p *Plan, opts ValidateOptions) (Environment, error) { return plan.Validate(p, opts) }

// Problems returns the individual problems in an error returned by Validate or Execute.
func Problems(err error) []*Problem { return plan.Problems(err) }

// SanitizeName turns a phase name into a file-name component; see plan.SanitizeName.
func SanitizeName(name string) string { return plan.SanitizeName(name) }

// PhaseFileName is the results file of phase index i (0-based); see plan.PhaseFileName.
func PhaseFileName(i int, name string) string { return plan.PhaseFileName(i, name) }
