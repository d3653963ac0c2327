package cli

import "github.com/muster-tool/muster/internal/fault"

// The exit status of every muster command. This table is the only place the
// numbers live; man/muster.1 documents them and a test keeps the two in
// step.
const (
	ExitOK               = 0 // success
	ExitFailure          = 1 // the work failed (an apply line failed, a declaration is invalid, ...)
	ExitUsage            = 2 // the command line was wrong
	ExitRefused          = 3 // refused for security: bad signature, rollback, revoked identity, wrong recipient, spent or expired token
	ExitTemporary        = 4 // temporary failure: lock held, spool unreachable or not writable; try again later
	ExitNodesFailed      = 5 // report: a node failed the generation
	ExitNodesOutstanding = 6 // report --fail-on outstanding: a node has not applied the generation yet
	ExitRestart          = 7 // apply installed a new muster that passed its self-check; run apply again with it
)

// exitStatus is the table of statuses shown in help and checked against the
// man page.
var exitStatus = []struct {
	Code    int
	Meaning string
}{
	{ExitOK, "success"},
	{ExitFailure, "failure: the work could not be done"},
	{ExitUsage, "usage error: unknown command or flag, missing argument"},
	{ExitRefused, "refused for security: bad signature, rollback, revoked identity, wrong recipient, spent or expired token"},
	{ExitTemporary, "temporary failure: lock held, spool unreachable or not writable; try again later"},
	{ExitNodesFailed, "report: at least one node failed the generation"},
	{ExitNodesOutstanding, "report --fail-on outstanding: at least one node has not applied the generation"},
	{ExitRestart, "apply: a new muster was installed and passed its self-check; it runs from the next apply"},
}

// exitCode maps an error's class to its exit status.
func exitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	switch fault.ClassOf(err) {
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
	case fault.Restart:
		return ExitRestart
	}
	return ExitFailure
}
