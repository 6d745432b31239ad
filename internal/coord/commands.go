package coord

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/loadproof/loadproof/internal/result"
)

// AllowedCommands are the client commands a worker runs from a task's command line, as the
// loadproof tree spells them: `linkkeys worker` runs one segment of a LinkKeys client from its
// JSON spec (the clients' own fan-out form). A Keycast task is no command line but a typed
// KeycastSpec the worker runs in the library. A task naming anything else is refused: a worker
// never runs a shell command or a server.
var AllowedCommands = [][]string{
	{"linkkeys", "worker"},
}

// CoordinatedCommands are the client commands `coordinate` spreads: each worker's tasks are then
// AllowedCommands (a capacity plan's phases reach the workers as `keycast run` tasks).
var CoordinatedCommands = [][]string{
	{"keycast", "run"},
	{"keycast", "capacity"},
	{"linkkeys", "connections"},
	{"linkkeys", "ddos"},
	{"linkkeys", "handshake-bench"},
	{"linkkeys", "request-bench"},
}

// CheckCoordinated reports whether args start with a command coordinate spreads.
func CheckCoordinated(args []string) error { return checkIn(CoordinatedCommands, args) }

// ErrRefused marks a task a worker refused (unknown command, unauthorized target).
var ErrRefused = errors.New("coord: task refused")

// CheckCommand reports whether args start with an allowed client command.
func CheckCommand(args []string) error { return checkIn(AllowedCommands, args) }

func checkIn(allowed [][]string, args []string) error {
	for _, c := range allowed {
		if len(args) >= len(c) && slices.Equal(args[:len(c)], c) {
			for _, a := range args[len(c):] {
				if a == "--" {
					return fmt.Errorf("%w: %q: a task carries flags only", ErrRefused, strings.Join(args, " "))
				}
			}
			return nil
		}
	}
	var names []string
	for _, c := range allowed {
		names = append(names, strings.Join(c, " "))
	}
	return fmt.Errorf("%w: %q is not a client command that can be spread (allowed: %s)", ErrRefused, strings.Join(args[:min(len(args), 2)], " "), strings.Join(names, ", "))
}

// MaxSegments bounds the segment count of a task, as result.MaxSegments bounds --segment: beyond it
// a share is no longer a meaningful piece of a run, and a huge count only costs memory.
const MaxSegments = result.MaxSegments

// taskFlags are the only flags a task's command may carry, as LinkKeysRun writes them: each flag
// with its value as the next argument (true: the flag takes a value; false: a switch). A worker
// refuses anything else, so a task cannot open a dashboard, write an output file or read a file
// the worker did not offer.
var taskFlags = map[string]map[string]bool{
	"linkkeys worker": {"--spec": true},
}

// CheckTaskFlags applies the task flag allow list to args (an allowed command, CheckCommand).
func CheckTaskFlags(args []string) error {
	if err := CheckCommand(args); err != nil {
		if len(args) >= 2 && args[0] == "keycast" && args[1] == "run" {
			return fmt.Errorf("%w: a Keycast task travels as a typed spec (KeycastSpec), not as a `keycast run` command line; run the same loadproof version on the coordinator and the workers", ErrRefused)
		}
		return err
	}
	cmd := strings.Join(args[:2], " ")
	allowed := taskFlags[cmd]
	seen := map[string]bool{}
	for i := 2; i < len(args); i++ {
		a := args[i]
		takes, ok := allowed[a]
		if !ok {
			return fmt.Errorf("%w: %q is not a flag a %s task may carry (allowed: the run's own load settings)", ErrRefused, clip(a), cmd)
		}
		if seen[a] {
			return fmt.Errorf("%w: %s is given twice; a task gives each flag once", ErrRefused, a)
		}
		seen[a] = true
		if !takes {
			continue
		}
		if i+1 >= len(args) {
			return fmt.Errorf("%w: %s needs a value", ErrRefused, a)
		}
		i++
	}
	for f := range allowed {
		if !seen[f] && taskFlagRequired[f] {
			return fmt.Errorf("%w: a %s task needs %s", ErrRefused, cmd, f)
		}
	}
	return nil
}

// taskFlagRequired are the task flags a task must carry.
var taskFlagRequired = map[string]bool{"--spec": true}
