package systemd

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/muster-tool/muster/internal/resource"
)

// liveUnit writes unit into /run/systemd/system of the running systemd,
// reloads it, and removes the unit (stopped, disabled, reloaded) when the
// test ends. It skips where systemd is not the running init, or not as
// root; the lab (make lab) runs these tests inside a booted host.
func liveUnit(t *testing.T, name, body string) *Systemd {
	t.Helper()
	s := New("/")
	if os.Geteuid() != 0 || !s.CanRun() {
		t.Skip("needs root where systemd is the running init (make lab runs it in a booted host)")
	}
	t.Cleanup(func() { s.Close() })
	path := filepath.Join("/run/systemd/system", name)
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	systemctl := func(args ...string) {
		if out, err := exec.Command("systemctl", args...).CombinedOutput(); err != nil {
			t.Logf("systemctl %v: %v\n%s", args, err, out)
		}
	}
	t.Cleanup(func() {
		systemctl("stop", name)
		systemctl("disable", "--runtime", name)
		exec.Command("systemctl", "reset-failed", name).Run() // only a failed unit has a state to reset
		os.Remove(path)
		systemctl("daemon-reload")
	})
	systemctl("daemon-reload")
	return s
}

// The read-back reads enablement from the unit files as they are: a link
// removed by hand shows at once, though systemd's own record of the unit
// (what Look may answer from) keeps saying enabled until a reload.
func TestUnitsReadLinksAsTheyAre(t *testing.T) {
	const unit = "muster-live-links.service"
	s := liveUnit(t, unit, "[Service]\nExecStart=/bin/sleep infinity\n\n[Install]\nWantedBy=multi-user.target\n")
	ctx := context.Background()
	if out, err := exec.Command("systemctl", "enable", "--runtime", unit).CombinedOutput(); err != nil {
		t.Fatalf("systemctl enable: %v\n%s", err, out)
	}
	for name, read := range map[string]func(context.Context, []string) ([]resource.UnitState, error){"Look": s.Look, "Units": s.Units} {
		st, err := read(ctx, []string{unit})
		if err != nil || st[0].Err != nil || !st[0].Enabled {
			t.Fatalf("%s of an enabled unit: %+v, %v", name, st, err)
		}
	}
	if err := os.Remove(filepath.Join("/run/systemd/system/multi-user.target.wants", unit)); err != nil {
		t.Fatal(err)
	}
	st, err := s.Units(ctx, []string{unit})
	if err != nil || st[0].Err != nil || st[0].Enabled {
		t.Fatalf("Units after its link was removed by hand: %+v, %v; want disabled", st, err)
	}
	look, err := s.Look(ctx, []string{unit})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Look after the link was removed by hand: enabled=%v (systemd's own record)", look[0].Enabled)
}

// A unit that fails to start fails with systemd's message and the last
// lines the unit wrote, which say why.
func TestStartFailureSaysWhy(t *testing.T) {
	const unit = "muster-live-broken.service"
	s := liveUnit(t, unit, "[Service]\nType=oneshot\nExecStart=/bin/sh -c 'echo cannot open /etc/nothing.conf >&2; exit 3'\n")
	err := s.SetRunning(context.Background(), unit, true)
	if err == nil {
		t.Fatal("a unit that exits 3 at once started")
	}
	for _, want := range []string{"start unit " + unit, "failed because the control process exited with error code", "its log: cannot open /etc/nothing.conf"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
