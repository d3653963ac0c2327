package s3server

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServerDiesWithTheTest: a test process that ends without its
// clean-up (a timeout, a kill) takes its versitygw with it. The child
// test starts a server, prints its pid and exits at once.
func TestServerDiesWithTheTest(t *testing.T) {
	if os.Getenv("S3SERVER_ORPHAN_CHILD") == "1" {
		s := Start(t)
		fmt.Printf("pid %d\n", s.cmd.Process.Pid)
		os.Exit(0) // no clean-up runs
	}
	Binary(t)
	cmd := exec.Command(os.Args[0], "-test.run", "^TestServerDiesWithTheTest$")
	// The child's scratch, which it leaves, goes in this test's.
	cmd.Env = append(os.Environ(), "S3SERVER_ORPHAN_CHILD=1", "TMPDIR="+t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child test: %v; output %s", err, out)
	}
	_, field, ok := strings.Cut(string(out), "pid ")
	pid, err := strconv.Atoi(strings.TrimSpace(field))
	if !ok || err != nil {
		t.Fatalf("child test printed %q, want its server's pid", out)
	}
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			time.Sleep(time.Second) // let it go before its directory is removed
			t.Fatalf("versitygw (pid %d) still runs after its test process exited", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
