// Package outcome owns the one rule shared by briefings and reports: a
// document's outcome is computed from its lines, never stored beside them
// where it could disagree.
package outcome

import "fmt"

// Status is the status of one line.
type Status string

// Line statuses. Briefings use OK, Warn and Failed; reports use OK (for an
// unchanged resource), Changed, Removed and Failed. Every status other than
// Failed counts as verified.
const (
	OK      Status = "ok"
	Warn    Status = "warn"
	Failed  Status = "failed"
	Changed Status = "changed"
	Removed Status = "removed"
)

// Valid reports whether s is a known status.
func (s Status) Valid() bool {
	switch s {
	case OK, Warn, Failed, Changed, Removed:
		return true
	}
	return false
}

// Line is one check or resource in a briefing or report.
type Line struct {
	ID     string `toml:"id" json:"id"`
	Status Status `toml:"status" json:"status"`
	Detail string `toml:"detail,omitempty" json:"detail"`
	// Digest is the digest of the verified state of a report's resource
	// line; empty for briefings and failed lines.
	Digest string `toml:"digest,omitempty" json:"digest"`
}

// Outcome is the verdict computed from a set of lines.
type Outcome string

const (
	// Passed: no line failed. For a briefing this means eligible; for a
	// report, applied.
	Passed Outcome = "passed"
	// Failing: at least one line failed (ineligible; failed).
	Failing Outcome = "failed"
)

// Of computes the outcome of lines. It is the only place this rule lives.
// A line with an unknown status counts as failed: what was not understood
// was not verified.
func Of(lines []Line) Outcome {
	for _, l := range lines {
		if l.Status == Failed || !l.Status.Valid() {
			return Failing
		}
	}
	return Passed
}

// FailedLines returns the lines that make the outcome Failing.
func FailedLines(lines []Line) []Line {
	var out []Line
	for _, l := range lines {
		if l.Status == Failed || !l.Status.Valid() {
			out = append(out, l)
		}
	}
	return out
}

// Check validates a decoded list of lines from outside: every line needs an
// id and a known status.
func Check(lines []Line) error {
	for i, l := range lines {
		if l.ID == "" {
			return fmt.Errorf("line %d has no id", i+1)
		}
		if !l.Status.Valid() {
			return fmt.Errorf("line %q has unknown status %q", l.ID, l.Status)
		}
	}
	return nil
}
