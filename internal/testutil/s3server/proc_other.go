//go:build !linux

package s3server

import "syscall"

// stopWithTest: only Linux can tie a child's life to its parent's; the
// server is stopped by the test's clean-up alone.
func stopWithTest() *syscall.SysProcAttr { return nil }
