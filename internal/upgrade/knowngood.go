package upgrade

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/muster-tool/muster/internal/tomlfile"

	"github.com/muster-tool/muster/internal/atomicfile"
)

// Files in the state directory shared with the launcher (dist/muster-launch).
const (
	// KnownGoodDir holds the last muster binary that ran a whole apply
	// and sent its report here ("muster"), and its version ("version").
	KnownGoodDir = "known-good"
	// RollbackNote is written by the launcher when it restored the
	// known-good binary; the next apply reports it and removes it.
	RollbackNote = "rollback.note"
	// LaunchFailures counts failed starts in a row (the launcher's).
	LaunchFailures = "launch-failures"
)

// selfExe is the running binary, whatever name it was started by and even
// after a package upgrade replaced the file it was started from.
var selfExe = "/proc/self/exe"

// AfterReport blesses the running muster as the known-good one: call it
// after an apply that ran to the end and sent its report, with this
// binary's version. That apply is the proof the binary works here, and it
// ends the probation of a newly installed version. Only the installed
// binary (ROOT/usr/bin/muster) is blessed, not a copy run from elsewhere,
// so that a rollback restores what the package put there. It reports
// whether it copied anything; a known-good copy of the same version is
// left alone.
func AfterReport(state, root, version string) (bool, error) {
	running, err := os.Stat(selfExe)
	if err != nil {
		return false, nil // no way to tell which binary runs: bless nothing
	}
	installed, err := os.Stat(filepath.Join(root, BinaryPath))
	if err != nil || !os.SameFile(running, installed) {
		return false, nil
	}
	return Bless(state, selfExe, version)
}

// Bless makes binary the known-good muster of version, unless it already
// is. The binary goes in first and its version after, each atomically, so
// a crash between the two leaves a version file naming the binary before;
// the launcher asks the binary itself for its version.
//
// Every apply that reports ends here, so the usual case (this binary is
// already the known-good one) is decided from two stats, without reading
// either binary: the copy has the binary's size and was made after the
// binary was last written.
func Bless(state, binary, version string) (bool, error) {
	dir := filepath.Join(state, KnownGoodDir)
	kg := filepath.Join(dir, "muster")
	bin, err := os.Stat(binary)
	if err != nil {
		return false, fmt.Errorf("known-good muster: %w", err)
	}
	if v, _ := KnownGoodVersion(state); v == version {
		if old, err := os.Stat(kg); err == nil && old.Size() == bin.Size() && !old.ModTime().Before(bin.ModTime()) {
			return false, nil
		}
	}
	data, err := os.ReadFile(binary)
	if err != nil {
		return false, fmt.Errorf("known-good muster: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, fmt.Errorf("known-good muster: %w", err)
	}
	if err := atomicfile.WriteFile(kg, data, 0o755); err != nil {
		return false, fmt.Errorf("known-good muster: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, "version"), []byte(version+"\n"), 0o644); err != nil {
		return false, fmt.Errorf("known-good muster: %w", err)
	}
	return true, nil
}

// KnownGoodVersion returns the version of the known-good binary, "" when
// there is none.
func KnownGoodVersion(state string) (string, error) {
	b, err := os.ReadFile(filepath.Join(state, KnownGoodDir, "version"))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	return strings.TrimSpace(string(b)), err
}

// restoreKnownGood copies the known-good binary over ROOT/usr/bin/muster
// (a temp name in the same directory, then rename), as the launcher does.
func restoreKnownGood(state, root string) (string, error) {
	v, err := KnownGoodVersion(state)
	if err != nil || v == "" {
		return "", fmt.Errorf("no known-good muster in %s", filepath.Join(state, KnownGoodDir))
	}
	data, err := os.ReadFile(filepath.Join(state, KnownGoodDir, "muster"))
	if err != nil {
		return "", fmt.Errorf("known-good muster: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(root, BinaryPath), data, 0o755); err != nil {
		return "", fmt.Errorf("restore the known-good muster %s: %w", v, err)
	}
	return v, nil
}

// rollback is the launcher's note (see dist/muster-launch).
type rollback struct {
	FailedVersion   string `toml:"failed_version"`
	Failures        int    `toml:"failures"`
	Reason          string `toml:"reason"`
	Stderr          string `toml:"stderr"`
	RestoredVersion string `toml:"restored_version"`
	At              string `toml:"at"`
}

// readRollback reads the launcher's note; nil when there is none.
func readRollback(state string) (*rollback, error) {
	path := filepath.Join(state, RollbackNote)
	data, err := tomlfile.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, tomlfile.In(path, err)
	}
	var r rollback
	err = tomlfile.Decode(data, &r)
	if err == nil && (r.FailedVersion == "" || r.RestoredVersion == "") {
		err = errors.New("failed_version or restored_version missing")
	}
	if err != nil {
		return nil, fmt.Errorf("rollback note %s: %v", path, err)
	}
	return &r, nil
}

func (r *rollback) at() time.Time {
	t, err := time.Parse(time.RFC3339, r.At)
	if err != nil {
		return time.Time{}
	}
	return t
}

// summary is the report's note: what failed, how, and what came back.
func (r *rollback) summary() string {
	s := fmt.Sprintf("muster %s failed to start %d times in a row (%s", r.FailedVersion, r.Failures, r.Reason)
	if r.Stderr != "" {
		s += ": " + r.Stderr
	}
	return s + "); rolled back to " + r.RestoredVersion
}
