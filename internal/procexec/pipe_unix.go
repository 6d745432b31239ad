//go:build unix

package procexec

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
)

// The parent pipe: every child gets the read end; only this process holds the write end, which
// the system closes when the process ends, however it ends. Both are kept for the life of the
// process (an *os.File that is collected is closed).
var parentPipe struct {
	once sync.Once
	r, w *os.File
	err  error
}

// passPipe adds the read end of the parent pipe to cmd.ExtraFiles and names its descriptor in the
// child (3 onwards, after stdin, stdout and stderr) in ParentEnv. It is used off Linux, and on Linux
// only by the test of the fallback.
func passPipe(cmd *exec.Cmd, sig syscall.Signal) error {
	p := &parentPipe
	p.once.Do(func() { p.r, p.w, p.err = os.Pipe() })
	if p.err != nil {
		return fmt.Errorf("procexec: making the pipe that tells a child its parent has gone: %w", p.err)
	}
	cmd.ExtraFiles = append(cmd.ExtraFiles, p.r)
	setEnv(cmd, 2+len(cmd.ExtraFiles), sig)
	return nil
}

// watch reads the parent pipe on descriptor fd until end of file and then sends sig to this
// process. A descriptor that is not a pipe is left alone: the variable came from elsewhere.
func watch(fd int, sig syscall.Signal) {
	var st syscall.Stat_t
	if fd < 3 || syscall.Fstat(fd, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFIFO {
		return
	}
	syscall.CloseOnExec(fd) // this process's children get their own pipe, from Start
	f := os.NewFile(uintptr(fd), "procexec-parent")
	go func() {
		_, _ = io.Copy(io.Discard, f) // nothing is ever written: this returns when the parent ends
		_ = syscall.Kill(os.Getpid(), sig)
	}()
}
