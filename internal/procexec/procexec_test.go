package procexec

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
)

func TestFromEnv(t *testing.T) {
	tests := []struct {
		value string
		n     int
		sig   syscall.Signal
		ok    bool
	}{
		{"3:15", 3, syscall.SIGTERM, true},
		{"4242:9", 4242, syscall.SIGKILL, true},
		{"3", 0, 0, false},
		{"x:y", 0, 0, false},
		{"3:0", 0, 0, false},
		{"-1:9", 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			t.Setenv(ParentEnv, tt.value)
			n, sig, ok := fromEnv()
			if n != tt.n || sig != tt.sig || ok != tt.ok {
				t.Errorf("fromEnv(%q) = %d, %v, %v; want %d, %v, %v", tt.value, n, sig, ok, tt.n, tt.sig, tt.ok)
			}
			if _, set := os.LookupEnv(ParentEnv); set {
				t.Errorf("%s still set after fromEnv: the child's children would inherit it", ParentEnv)
			}
		})
	}
}

func TestTieKeepsCallersSettings(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	attr := &syscall.SysProcAttr{}
	cmd.SysProcAttr = attr
	cmd.Env = []string{"PROCEXEC_KEEP=1"}
	if err := tie(cmd, Options{}); err != nil {
		t.Fatal(err)
	}
	if cmd.SysProcAttr != attr {
		t.Error("tie replaced the caller's SysProcAttr")
	}
	if cmd.Env[0] != "PROCEXEC_KEEP=1" {
		t.Errorf("tie replaced the caller's environment: %q", cmd.Env)
	}
}

func TestCommandResolvesOwnExecutable(t *testing.T) {
	cmd, err := Command("", "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	self, _ := os.Executable()
	if cmd.Path != self || len(cmd.Args) != 3 || cmd.Args[1] != "a" || cmd.Args[2] != "b" {
		t.Errorf("Command(\"\", a, b) = %s %q; want %s with args a b", cmd.Path, cmd.Args, self)
	}
}
