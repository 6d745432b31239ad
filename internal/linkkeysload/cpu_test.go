package linkkeysload

import (
	"os"
	"os/exec"
	"testing"
)

func TestServerCPUReadsProc(t *testing.T) {
	if _, ok := ServerCPU(0); ok {
		t.Fatal("pid 0 must not be readable")
	}
	if _, ok := ServerCPU(1 << 30); ok {
		t.Fatal("a pid that cannot exist must not be readable")
	}
	// This process with a child: both are counted.
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep binary:", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	found := false
	for _, c := range procChildren(os.Getpid()) {
		found = found || c == cmd.Process.Pid
	}
	if !found {
		t.Fatalf("child %d not among %v", cmd.Process.Pid, procChildren(os.Getpid()))
	}
	if _, ok := ServerCPU(os.Getpid()); !ok {
		t.Fatal("own process not readable")
	}
	if processCPU() <= 0 {
		t.Fatal("no CPU time for this process")
	}
}

func TestProcessRunning(t *testing.T) {
	if running, known := processRunning(os.Getpid()); !running || !known {
		t.Errorf("this process: running %v known %v", running, known)
	}
	if _, known := processRunning(0); known {
		t.Error("pid 0 is known")
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("no true binary:", err)
	}
	if running, known := processRunning(cmd.Process.Pid); running || !known {
		t.Errorf("an exited child: running %v known %v", running, known)
	}
}
