package upgrade

import (
	"fmt"
	"time"
)

// Why a version failed.
const (
	// FailedCheck: installed, then its self-check failed; the previous
	// version was reinstalled in the same apply.
	FailedCheck = "self-check"
	// FailedStart: passed its self-check, then failed to start from the
	// timer until the launcher rolled back to the known-good binary.
	FailedStart = "start"
)

// Failure is a muster version that failed on this host.
type Failure struct {
	Version string    `toml:"version"`
	At      time.Time `toml:"at"`
	// Reason is FailedCheck or FailedStart.
	Reason string `toml:"reason"`
	// Detail is what was seen: an exit status and the binary's first
	// lines of output, or how many starts failed.
	Detail string `toml:"detail,omitempty"`
}

// Failed is the list of versions that failed here, kept in the host state
// file. A declared version on the list is not installed again: only a
// version not on it (a newer one) is tried.
type Failed []Failure

// maxFailed bounds the list: the oldest entries go first.
const maxFailed = 32

// Find returns the entry for version.
func (f Failed) Find(version string) (Failure, bool) {
	for _, x := range f {
		if x.Version == version {
			return x, true
		}
	}
	return Failure{}, false
}

// With returns the list with x added, replacing an entry for the same
// version.
func (f Failed) With(x Failure) Failed {
	out := make(Failed, 0, len(f)+1)
	for _, y := range f {
		if y.Version != x.Version {
			out = append(out, y)
		}
	}
	out = append(out, x)
	if len(out) > maxFailed {
		out = out[len(out)-maxFailed:]
	}
	return out
}

// held is the detail of the line of a declared version that is not tried
// again.
func (x Failure) held() string {
	what := "failed its self-check"
	if x.Reason == FailedStart {
		what = "failed to start"
	}
	return fmt.Sprintf("version %s %s here on %s (%s); not retried until a newer version is declared",
		x.Version, what, x.At.UTC().Format("2006-01-02 15:04 UTC"), x.Detail)
}
