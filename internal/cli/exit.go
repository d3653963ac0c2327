package cli

import (
	"errors"

	"github.com/muster-tool/muster/internal/fault"
)

// The exit status of every muster command. The numbers live here and their
// meanings in exitStatus below, and nowhere else; man/muster.1 documents
// them and a test keeps the two in step.
const (
	ExitOK = iota
	ExitFailure
	ExitUsage
	ExitRefused
	ExitTemporary
	ExitNodesFailed
	ExitNodesOutstanding
	ExitRestart
)

// exitStatus is what each status means, shown in help and checked against
// the man page.
var exitStatus = []struct {
	Code    int
	Meaning string
}{
	{ExitOK, "success"},
	{ExitFailure, "failure: the work could not be done"},
	{ExitUsage, "usage error: unknown command or flag, missing argument"},
	{ExitRefused, "refused for security: bad signature, rollback, revoked identity, wrong recipient, spent or expired token"},
	{ExitTemporary, "temporary failure: lock held, spool unreachable or not writable, stopped by a signal; try again later"},
	{ExitNodesFailed, "report: at least one node failed the generation"},
	{ExitNodesOutstanding, "report --fail-on outstanding, or --wait at its timeout: at least one node has not applied the generation"},
	{ExitRestart, "apply: a new muster was installed and passed its self-check; it runs from the next apply"},
}

// exitCode maps an error's class to its exit status.
func exitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var silent *silentError
	if errors.As(err, &silent) {
		return silent.code
	}
	return classCode(fault.ClassOf(err))
}

// classCode is the exit status of an error of class c.
func classCode(c fault.Class) int {
	switch c {
	case fault.Usage:
		return ExitUsage
	case fault.Refused:
		return ExitRefused
	case fault.Temporary:
		return ExitTemporary
	case fault.NodesFailed:
		return ExitNodesFailed
	case fault.NodesOutstanding:
		return ExitNodesOutstanding
	}
	return ExitFailure
}
