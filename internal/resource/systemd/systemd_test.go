package systemd

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const demoUnit = `[Unit]
Description=muster test service

[Service]
ExecStart=/bin/true

[Install]
WantedBy=multi-user.target
`

// staticUnit has no [Install] section: it can only be pulled in by others.
const staticUnit = `[Unit]
Description=muster test helper

[Service]
ExecStart=/bin/true
`

func offlineRoot(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("systemctl"); err != nil {
		t.Skip("systemctl not installed")
	}
	root := t.TempDir()
	dir := filepath.Join(root, "lib/systemd/system")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"demo.service": demoUnit, "helper.service": staticUnit} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func isEnabled(t *testing.T, s *Systemd, unit string) bool {
	t.Helper()
	st, err := s.Units(context.Background(), []string{unit})
	if err == nil {
		err = st[0].Err
	}
	if err != nil {
		t.Fatalf("Units(%s): %v", unit, err)
	}
	return st[0].Enabled
}

// Enabling and disabling under a root must change that tree's wants
// symlinks, and is-enabled must read them back.
func TestEnableDisableOffline(t *testing.T) {
	root := offlineRoot(t)
	s := New(root)
	ctx := context.Background()
	link := filepath.Join(root, "etc/systemd/system/multi-user.target.wants/demo.service")

	if isEnabled(t, s, "demo.service") {
		t.Fatal("fresh unit reported enabled")
	}
	if err := s.SetEnabled(ctx, "demo.service", true); err != nil {
		t.Fatal(err)
	}
	if !isEnabled(t, s, "demo.service") {
		t.Fatal("enabled unit reported disabled")
	}
	if _, err := os.Lstat(link); err != nil {
		t.Fatalf("enable made no wants link under the root: %v", err)
	}
	if err := s.SetEnabled(ctx, "demo.service", false); err != nil {
		t.Fatal(err)
	}
	if isEnabled(t, s, "demo.service") {
		t.Fatal("disabled unit reported enabled")
	}
	if _, err := os.Lstat(link); err == nil {
		t.Fatal("disable left the wants link")
	}
	if !isEnabled(t, s, "helper.service") {
		t.Error("static unit reported disabled; systemctl counts it enabled")
	}
}

func TestUnknownUnitNamed(t *testing.T) {
	s := New(offlineRoot(t))
	ctx := context.Background()
	st, err := s.Units(ctx, []string{"demo.service", "nowhere.service", "helper.service", "nowhere-else.service"})
	if err != nil {
		t.Fatal(err)
	}
	for i, u := range []string{"nowhere.service", "nowhere-else.service"} {
		if err := st[1+2*i].Err; err == nil || !strings.Contains(err.Error(), u) {
			t.Errorf("Units of a missing unit %s: err = %v, want an error naming it", u, err)
		}
	}
	// One call per run of known units: those after a missing one are
	// read all the same.
	if st[0].Err != nil || st[0].Enabled || st[2].Err != nil || !st[2].Enabled {
		t.Errorf("Units of known units beside missing ones: %+v", st)
	}
	err = s.SetEnabled(ctx, "nowhere.service", true)
	if err == nil || !strings.Contains(err.Error(), "nowhere.service") || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("SetEnabled of a missing unit: err = %v, want systemctl's message naming it", err)
	}
}

// A masked unit is not enabled, and enabling it fails with systemctl's
// reason rather than silently doing nothing.
func TestMaskedUnit(t *testing.T) {
	root := offlineRoot(t)
	if err := exec.Command("systemctl", "--root="+root, "mask", "demo.service").Run(); err != nil {
		t.Fatal(err)
	}
	s := New(root)
	if isEnabled(t, s, "demo.service") {
		t.Error("masked unit reported enabled")
	}
	err := s.SetEnabled(context.Background(), "demo.service", true)
	if err == nil || !strings.Contains(err.Error(), "masked") {
		t.Errorf("enabling a masked unit: err = %v, want systemctl's reason", err)
	}
}

func TestCanRun(t *testing.T) {
	running := t.TempDir()
	tests := []struct {
		name, root, runDir string
		want               bool
	}{
		{"offline root", t.TempDir(), running, false},
		{"running systemd", "/", running, true},
		{"other init", "/", filepath.Join(running, "absent"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(tt.root)
			s.runDir = tt.runDir
			if got := s.CanRun(); got != tt.want {
				t.Errorf("CanRun = %v, want %v", got, tt.want)
			}
		})
	}
}

// Under a root nothing can run, and asking must say so rather than act on
// the machine's own systemd.
func TestNoRunningOffline(t *testing.T) {
	s := New(offlineRoot(t))
	ctx := context.Background()
	for name, call := range map[string]func() error{
		"Reload":     func() error { return s.Reload(ctx) },
		"SetRunning": func() error { return s.SetRunning(ctx, "demo.service", true) },
		"Restart":    func() error { return s.Restart(ctx, "demo.service") },
	} {
		if err := call(); err == nil || !strings.Contains(err.Error(), "cannot be started") && !strings.Contains(err.Error(), "not the running init") {
			t.Errorf("%s under a root: err = %v", name, err)
		}
	}
}

func TestRefusesBadUnitNames(t *testing.T) {
	s := New(t.TempDir())
	for _, unit := range []string{"", "--root=/", "-h", "../etc/passwd", "a b"} {
		if _, err := s.Units(context.Background(), []string{unit}); err == nil || !strings.Contains(err.Error(), "not a valid systemd unit name") {
			t.Errorf("Units(%q): err = %v", unit, err)
		}
	}
}

func TestUnitFile(t *testing.T) {
	s := New("/")
	for path, want := range map[string]bool{
		"/etc/systemd/system/labd.service":                          true,
		"/etc/systemd/system/labd.service.d/colour.conf":            true,
		"/lib/systemd/system/labd.service":                          true,
		"/usr/lib/systemd/system/multi-user.target.wants/a.service": true,
		"/run/systemd/system/x.service":                             true,
		"/etc/systemd/system":                                       false,
		"/etc/systemd/system.conf":                                  false,
		"/etc/labd/labd.conf":                                       false,
		"/etc/systemd/systemx/a.service":                            false,
	} {
		if got := s.UnitFile(path); got != want {
			t.Errorf("UnitFile(%s) = %v, want %v", path, got, want)
		}
	}
}
