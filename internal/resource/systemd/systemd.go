// Package systemd is the systemd backend of resource.Services: it enables,
// disables, starts, stops and restarts units and reads their state back,
// all through systemctl. Under a root other than "/" it uses
// systemctl --root, which changes and reads the unit file symlinks of that
// tree offline; units cannot be started there, so CanRun is false. On "/"
// units run only where systemd is the running init.
package systemd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/muster-tool/muster/internal/resource"
)

var _ resource.Services = (*Systemd)(nil)

// Systemd manages the units of one root.
type Systemd struct {
	root string
	// runDir is where a running systemd announces itself; a field so the
	// decision can be tested on machines with either init.
	runDir string
}

// New returns the backend for root: "/" for the running system, or the
// directory of an image or other offline tree. A relative root is taken
// from the working directory.
func New(root string) *Systemd {
	if root == "" {
		root = "/"
	}
	if abs, err := filepath.Abs(root); err == nil {
		root = abs
	}
	return &Systemd{root: filepath.Clean(root), runDir: "/run/systemd/system"}
}

// Root returns the root the backend acts in.
func (s *Systemd) Root() string { return s.root }

func (s *Systemd) offline() bool { return s.root != "/" }

// CanRun reports whether units can be started and stopped here: only on
// the running system, and only when systemd is its init.
func (s *Systemd) CanRun() bool {
	if s.offline() {
		return false
	}
	fi, err := os.Stat(s.runDir)
	return err == nil && fi.IsDir()
}

// enabledStates are the is-enabled answers systemctl itself counts as
// enabled (its exit status is 0 for exactly these): a static unit, pulled
// in by another, is as enabled as it can be.
var enabledStates = map[string]bool{
	"enabled": true, "enabled-runtime": true, "static": true, "indirect": true,
	"generated": true, "transient": true, "alias": true,
}

// disabledStates are the answers that mean the unit exists but is not
// enabled.
var disabledStates = map[string]bool{
	"disabled": true, "masked": true, "masked-runtime": true,
	"linked": true, "linked-runtime": true,
}

// IsEnabled reports whether unit is enabled, by systemctl is-enabled's own
// definition. A unit systemctl does not know is an error naming it.
func (s *Systemd) IsEnabled(ctx context.Context, unit string) (bool, error) {
	if err := checkUnit(unit); err != nil {
		return false, err
	}
	out, err := s.systemctl(ctx, s.offline(), "is-enabled", unit)
	state := firstLine(out)
	switch {
	case enabledStates[state]:
		return true, nil
	case disabledStates[state]:
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("is unit %s enabled%s: %w", unit, s.under(), err)
	}
	return false, fmt.Errorf("is unit %s enabled%s: systemctl answered %q", unit, s.under(), state)
}

// SetEnabled enables or disables unit.
func (s *Systemd) SetEnabled(ctx context.Context, unit string, enabled bool) error {
	if err := checkUnit(unit); err != nil {
		return err
	}
	verb := "disable"
	if enabled {
		verb = "enable"
	}
	if _, err := s.systemctl(ctx, s.offline(), verb, unit); err != nil {
		return fmt.Errorf("%s unit %s%s: %w", verb, unit, s.under(), err)
	}
	return nil
}

// IsActive reports whether unit is running (active, or reloading while
// active).
func (s *Systemd) IsActive(ctx context.Context, unit string) (bool, error) {
	if err := s.checkRun(unit); err != nil {
		return false, err
	}
	out, err := s.systemctl(ctx, false, "is-active", unit)
	switch state := firstLine(out); state {
	case "active", "reloading", "refreshing":
		return true, nil
	case "inactive", "failed", "activating", "deactivating", "maintenance":
		return false, nil
	default:
		if err != nil {
			return false, fmt.Errorf("is unit %s active: %w", unit, err)
		}
		return false, fmt.Errorf("is unit %s active: systemctl answered %q", unit, state)
	}
}

// SetRunning starts or stops unit and waits for the job to finish.
func (s *Systemd) SetRunning(ctx context.Context, unit string, running bool) error {
	if err := s.checkRun(unit); err != nil {
		return err
	}
	verb := "stop"
	if running {
		verb = "start"
	}
	if _, err := s.systemctl(ctx, false, verb, unit); err != nil {
		return fmt.Errorf("%s unit %s: %w", verb, unit, err)
	}
	return nil
}

// Restart restarts unit (starting it if it was stopped) and waits for the
// job to finish.
func (s *Systemd) Restart(ctx context.Context, unit string) error {
	if err := s.checkRun(unit); err != nil {
		return err
	}
	if _, err := s.systemctl(ctx, false, "restart", unit); err != nil {
		return fmt.Errorf("restart unit %s: %w", unit, err)
	}
	return nil
}

func (s *Systemd) checkRun(unit string) error {
	if err := checkUnit(unit); err != nil {
		return err
	}
	if !s.CanRun() {
		if s.offline() {
			return fmt.Errorf("unit %s: units cannot be started or stopped under %s", unit, s.root)
		}
		return fmt.Errorf("unit %s: systemd is not the running init here", unit)
	}
	return nil
}

func (s *Systemd) under() string {
	if s.offline() {
		return " under " + s.root
	}
	return ""
}

// checkUnit refuses names systemctl would read as options or that could
// name a path outside the unit directories.
func checkUnit(unit string) error {
	if unit == "" || unit[0] == '-' || strings.ContainsAny(unit, "/ \t\n") {
		return fmt.Errorf("unit name %q is not a valid systemd unit name", unit)
	}
	return nil
}

// systemctl runs systemctl without a pager or password prompt, with
// --root when offline, and returns its standard output. A failure carries
// systemctl's own message.
func (s *Systemd) systemctl(ctx context.Context, offline bool, args ...string) ([]byte, error) {
	full := []string{"--no-pager", "--no-ask-password"}
	if offline {
		full = append(full, "--root="+s.root)
	}
	full = append(full, args...)
	cmd := exec.CommandContext(ctx, "systemctl", full...)
	cmd.Env = append(os.Environ(), "LC_ALL=C", "SYSTEMD_PAGER=", "SYSTEMD_COLORS=0")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err == nil {
		return stdout.Bytes(), nil
	}
	if ctx.Err() != nil {
		return stdout.Bytes(), fmt.Errorf("systemctl: %w", ctx.Err())
	}
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) {
		return stdout.Bytes(), fmt.Errorf("run systemctl: %w", err)
	}
	msg := strings.Join(strings.Fields(strings.TrimSpace(stderr.String())), " ")
	if msg == "" {
		msg = fmt.Sprintf("exited with status %d", exitErr.ExitCode())
	}
	if len(msg) > 1000 {
		msg = msg[:1000] + " …"
	}
	return stdout.Bytes(), fmt.Errorf("systemctl: %s", msg)
}

func firstLine(b []byte) string {
	line, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimSpace(line)
}
