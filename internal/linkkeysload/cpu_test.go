package linkkeysload

import (
	"net"
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

// TestListensOnTellsTheServerFromAStalePID: this process listens on a port it opened; pid 1 and this
// process on another port do not.
func TestListensOnTellsTheServerFromAStalePID(t *testing.T) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := uint16(l.Addr().(*net.TCPAddr).Port)
	if owns, known := listensOn(os.Getpid(), port); !known || !owns {
		t.Fatalf("this process on its own listening port %d: owns=%v known=%v", port, owns, known)
	}
	if owns, known := listensOn(os.Getpid(), port+1); !known || owns {
		t.Fatalf("port %d it does not listen on: owns=%v known=%v", port+1, owns, known)
	}
	if owns, _ := listensOn(1, port); owns {
		t.Fatal("pid 1 owns our port")
	}
}
