package procgroup

import (
	"os"
	"os/exec"
	"testing"
)

// TestAlive: Alive knows a live pid from an exited one.
func TestAlive(t *testing.T) {
	if !Alive(os.Getpid()) {
		t.Fatal("Alive(self) = false")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if Alive(cmd.Process.Pid) {
		t.Errorf("Alive of an exited child (pid %d) = true", cmd.Process.Pid)
	}
	if Alive(0) || Alive(-1) {
		t.Error("Alive of pid 0 or -1 = true")
	}
}
