package s3server

import "syscall"

// stopWithTest makes the server die with the test process, even when the
// test binary is killed or times out and no clean-up runs: a leftover
// server would hold its port and directory on the machine.
func stopWithTest() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
