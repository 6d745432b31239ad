package procexec

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/testwait"
)

// The test binary plays three roles, chosen by roleEnv: the test itself; a parent that starts a
// grandchild and exits at once; the grandchild, which would sleep for an hour unless it dies with
// its parent.
const roleEnv = "PROCEXEC_TEST_ROLE"

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "parent-pdeathsig", "parent-watch":
		os.Exit(runParent(os.Getenv(roleEnv)))
	case "grandchild":
		WatchParent()
		time.Sleep(time.Hour)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runParent starts the grandchild, prints its pid and exits without waiting for it. The
// "parent-watch" role ties the grandchild by the parent pipe alone, as Start does off Linux; it
// exits before the grandchild can have reached WatchParent, the hard case for a watcher.
func runParent(role string) int {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), roleEnv+"=grandchild")
	cmd.Stderr = os.Stderr
	var err error
	if role == "parent-watch" {
		if err = passPipe(cmd, syscall.SIGTERM); err == nil {
			err = cmd.Start()
		}
	} else {
		err = Start(cmd, Options{})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(cmd.Process.Pid)
	return 0
}

func TestChildDiesWithParent(t *testing.T) {
	for _, role := range []string{"parent-pdeathsig", "parent-watch"} {
		t.Run(role, func(t *testing.T) {
			parent := exec.Command(os.Args[0], "-test.run=^$")
			parent.Env = append(os.Environ(), roleEnv+"="+role)
			parent.Stderr = os.Stderr
			out, err := parent.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := parent.Start(); err != nil {
				t.Fatal(err)
			}
			var line string
			testwait.Call(t, testwait.Long, "the parent's pid line and exit", func() {
				line, _ = bufio.NewReader(out).ReadString('\n')
				err = parent.Wait()
			})
			if err != nil {
				t.Fatalf("parent: %v", err)
			}
			pid, err := strconv.Atoi(strings.TrimSpace(line))
			if err != nil {
				t.Fatalf("parent printed %q, not the grandchild's pid", line)
			}
			// The parent has exited; the grandchild must follow within a bounded time.
			deadline := time.Now().Add(10 * time.Second)
			for alive(pid) {
				if time.Now().After(deadline) {
					_ = syscall.Kill(pid, syscall.SIGKILL)
					t.Fatalf("grandchild %d still running 10s after its parent exited", pid)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

// alive reports whether pid names a process that has not exited. A process that was killed but not
// yet reaped by its new parent (init, or whatever reaps orphans in this container) is a zombie and
// counts as gone.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses and may itself contain them.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}
