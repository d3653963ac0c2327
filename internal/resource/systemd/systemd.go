// Package systemd is the systemd backend of resource.Services: it enables,
// disables, starts, stops and restarts units and reloads systemd through
// systemctl, whose messages carry systemd's own reasons (a start that
// fails is followed by the last lines the unit wrote to the journal), and
// reads the state of units back.
//
// On the running system the state of all the units an apply names is read
// over one D-Bus connection to systemd (its private socket as root, else
// the system bus), with every query sent before the first answer is
// awaited: enablement as systemctl is-enabled computes it (from the unit
// files on disk, never a cached answer), whether each unit is active, and
// whether systemd runs the definition its files hold (NeedDaemonReload).
// Computing enablement costs systemd a scan of its unit directories per
// unit, more than all the rest: the first look of an apply (Look) takes
// it from systemd's own record of each unit instead, and only the
// read-back (Units) computes it, so a run that changes nothing costs
// about one systemctl show of its units (BenchmarkServicesNoop20).
// Under a root other than "/" it uses systemctl --root, which changes and
// reads the unit file symlinks of that tree offline, several units a
// call; units cannot be started there, so CanRun is false. On "/" units
// run only where systemd is the running init.
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
	"sync"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/muster-tool/muster/internal/resource"
)

var _ resource.Services = (*Systemd)(nil)

// Systemd manages the units of one root.
type Systemd struct {
	root string
	// runDir is where a running systemd announces itself; a field so the
	// decision can be tested on machines with either init.
	runDir string

	mu   sync.Mutex
	conn *dbus.Conn // to the running systemd, opened on first use
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

// SetRunning starts or stops unit and waits for the job to finish.
func (s *Systemd) SetRunning(ctx context.Context, unit string, running bool) error {
	if err := s.checkRun(unit); err != nil {
		return err
	}
	verb := "stop"
	if running {
		verb = "start"
	}
	began := time.Now()
	if _, err := s.systemctl(ctx, false, verb, unit); err != nil {
		return fmt.Errorf("%s unit %s: %w%s", verb, unit, err, s.lastWords(ctx, unit, began))
	}
	return nil
}

// Restart restarts unit (starting it if it was stopped) and waits for the
// job to finish.
func (s *Systemd) Restart(ctx context.Context, unit string) error {
	if err := s.checkRun(unit); err != nil {
		return err
	}
	began := time.Now()
	if _, err := s.systemctl(ctx, false, "restart", unit); err != nil {
		return fmt.Errorf("restart unit %s: %w%s", unit, err, s.lastWords(ctx, unit, began))
	}
	return nil
}

// lastWords is what the processes of unit wrote to the journal since a
// job on it began, its last few lines, to follow systemctl's message
// when the job failed: systemd says how the unit failed (its control
// process exited with an error code), the unit's own lines say why (the
// daemon's error), and the host's operator reads both in the report, not
// on the host. It is "" when the journal has nothing, or cannot be read.
func (s *Systemd) lastWords(ctx context.Context, unit string, since time.Time) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var msg string
	// The journal may store the unit's last lines a moment after systemd
	// reported the job: one more look.
	for try := 0; try < 2 && msg == "" && ctx.Err() == nil; try++ {
		if try > 0 {
			time.Sleep(300 * time.Millisecond)
		}
		cmd := exec.CommandContext(ctx, "journalctl", "--no-pager", "--quiet", "--output=cat", "--lines=3",
			fmt.Sprintf("--since=@%d", since.Unix()), "_SYSTEMD_UNIT="+unit)
		cmd.Env = append(os.Environ(), "LC_ALL=C", "SYSTEMD_PAGER=", "SYSTEMD_COLORS=0")
		out, err := cmd.Output()
		if err != nil {
			return ""
		}
		var lines []string
		for _, l := range strings.Split(string(out), "\n") {
			if l = strings.Join(strings.Fields(l), " "); l != "" {
				lines = append(lines, l)
			}
		}
		msg = strings.Join(lines, " | ")
	}
	if msg == "" {
		return ""
	}
	if len(msg) > 500 {
		msg = msg[:500] + " …"
	}
	return "; its log: " + msg
}

// Reload makes systemd read every unit file again (systemctl
// daemon-reload) and waits until it has.
func (s *Systemd) Reload(ctx context.Context) error {
	if !s.CanRun() {
		return errors.New("systemd is not the running init here: nothing to reload")
	}
	if _, err := s.systemctl(ctx, false, "daemon-reload"); err != nil {
		return fmt.Errorf("reload systemd: %w", err)
	}
	return nil
}

// unitDirs are the directories systemd reads unit files, drop-ins and
// .wants/.requires links from (systemd.unit(5), system units).
var unitDirs = []string{
	"/etc/systemd/system.control", "/run/systemd/system.control",
	"/run/systemd/transient", "/etc/systemd/system", "/run/systemd/system",
	"/usr/local/lib/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system",
}

// UnitFile reports whether path is in one of the directories systemd
// reads units from, or below one (a drop-in, a .wants link).
func (s *Systemd) UnitFile(path string) bool {
	path = filepath.Clean(path)
	for _, d := range unitDirs {
		if strings.HasPrefix(path, d+"/") {
			return true
		}
	}
	return false
}

// Close closes the connection to systemd, if one was opened.
func (s *Systemd) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil {
		return nil
	}
	err := s.conn.Close()
	s.conn = nil
	return err
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
