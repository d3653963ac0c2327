package upgrade

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/outcome"
	"github.com/muster-tool/muster/internal/resource"
)

// The muster packages of these tests, each built by scripts/deb.sh:
//
//	1.0  a real muster build, stamped 1.0
//	2.0  a binary that exits 1 at once (fails its self-check)
//	2.1  a binary for no architecture this machine runs (does not execute)
//	3.0  a binary that passes its self-check
//	4.0  a binary that passes its self-check and panics on every other start
func testDeb(t *testing.T, version string) string {
	t.Helper()
	var bin string
	switch version {
	case "1.0":
		bin = musterBinary(t, "1.0")
	case "2.0":
		bin = script(t, "#!/bin/sh\necho 'muster: error: this build cannot start' >&2\nexit 1\n")
	case "2.1":
		bin = script(t, "\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00not a program for any machine")
	case "3.0":
		bin = script(t, selfCheckOK+"echo 'muster 3.0 runs'\n")
	case "4.0":
		bin = script(t, selfCheckOK+"echo 'panic: runtime error: invalid memory address' >&2\nexit 2\n")
	default:
		t.Fatalf("no test package %s", version)
	}
	return musterDeb(t, version, bin)
}

// selfCheckOK passes the self-check when called with exactly the
// arguments CheckArgs gives, and answers version.
const selfCheckOK = `#!/bin/sh
if [ "$1" = apply ] && [ "$2" = --self-check ] && [ "$3" = --config ] && [ "$5" = --state ] &&
	{ [ $# -eq 6 ] || { [ $# -eq 8 ] && [ "$7" = --spool ]; }; }; then
	exit 0
fi
`

func packageSpec(version string) []resource.Spec {
	return []resource.Spec{{Kind: resource.Package, Name: PackageName, Version: version}}
}

func (h *testHost) guard(failed Failed) *Upgrade {
	return New(Options{Root: h.root, State: h.state, Config: "/etc/muster/muster.toml", Packages: h.apt,
		CheckTimeout: 20 * time.Second, Now: time.Now}, failed)
}

func (h *testHost) system() *resource.System {
	return &resource.System{Root: h.root, Packages: h.apt}
}

// dpkgInstalls counts the installs of muster dpkg logged in the root.
func (h *testHost) dpkgInstalls(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(h.root, "var/log/dpkg.log"))
	if err != nil {
		return 0
	}
	return strings.Count(string(b), " status installed muster:")
}

// Story (2) and the start of (1): a new version whose binary fails its
// self-check, or does not execute at all, fails the apply with the reason
// and the previous version is back at once, binary and dpkg alike; it is
// not tried again while it is declared; a newer version that passes its
// check is installed and asks for the restart.
func TestSelfCheckFailureReinstallsThePreviousVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHost(t)
	h.publish(t, testDeb(t, "1.0"), testDeb(t, "2.0"), testDeb(t, "2.1"), testDeb(t, "3.0"))
	h.install(t, "1.0")
	good := musterBinary(t, "1.0")
	bin := filepath.Join(h.root, BinaryPath)

	var failed Failed
	for _, c := range []struct {
		version string
		says    []string
	}{
		{"2.0", []string{"muster 2.0 was installed but " + bin + " failed its self-check: exit status 1: muster: error: this build cannot start", "reinstalled muster 1.0"}},
		{"2.1", []string{"muster 2.1 was installed but " + bin + " does not execute here: exec format error", "reinstalled muster 1.0"}},
	} {
		up := h.guard(failed)
		res := up.Apply(ctx, h.system(), packageSpec(c.version))
		if len(res) != 1 || res[0].Status != outcome.Failed {
			t.Fatalf("%s: results %+v, want one failed line", c.version, res)
		}
		for _, s := range c.says {
			if !strings.Contains(res[0].Detail, s) {
				t.Errorf("%s: line %q does not say %q", c.version, res[0].Detail, s)
			}
		}
		if v := h.installed(t); v != "1.0" {
			t.Errorf("%s: dpkg lists %s after the failed check, want 1.0", c.version, v)
		}
		if !fileEqual(t, bin, good) {
			t.Errorf("%s: %s is not muster 1.0 again", c.version, bin)
		}
		if up.Restart() {
			t.Errorf("%s: a failed check asks for a restart", c.version)
		}
		if len(up.Notes()) != 1 || !strings.Contains(up.Notes()[0], "muster "+c.version+" failed its self-check") {
			t.Errorf("%s: notes %q", c.version, up.Notes())
		}
		failed = up.Failed()
		if x, ok := failed.Find(c.version); !ok || x.Reason != FailedCheck {
			t.Fatalf("%s: not remembered as failed: %+v", c.version, failed)
		}
	}

	// Declared again: nothing is installed, and the line says why.
	before := h.dpkgInstalls(t)
	up := h.guard(failed)
	res := up.Apply(ctx, h.system(), packageSpec("2.0"))
	if res[0].Status != outcome.Failed || !strings.HasPrefix(res[0].Detail, "version 2.0 failed its self-check here on ") ||
		!strings.HasSuffix(res[0].Detail, "; not retried until a newer version is declared") {
		t.Errorf("2.0 declared again: %+v", res[0])
	}
	if n := h.dpkgInstalls(t); n != before {
		t.Errorf("2.0 declared again: dpkg installed muster %d more times", n-before)
	}
	if v := h.installed(t); v != "1.0" {
		t.Errorf("dpkg lists %s, want 1.0", v)
	}

	// A newer version passes and asks for the restart.
	up = h.guard(failed)
	res = up.Apply(ctx, h.system(), packageSpec("3.0"))
	if res[0].Status != outcome.Changed || !up.Restart() {
		t.Fatalf("3.0: %+v, restart %v; want changed and a restart", res[0], up.Restart())
	}
	if v := h.installed(t); v != "3.0" {
		t.Errorf("dpkg lists %s, want 3.0", v)
	}
	if len(up.Notes()) != 1 || up.Notes()[0] != "muster 3.0 installed and passed its self-check; it runs from the next apply" {
		t.Errorf("notes %q", up.Notes())
	}
	// Nothing changed: no check, no restart.
	up = h.guard(up.Failed())
	res = up.Apply(ctx, h.system(), packageSpec("3.0"))
	if res[0].Status != outcome.OK || up.Restart() || len(up.Notes()) != 0 {
		t.Errorf("3.0 again: %+v, restart %v, notes %q", res[0], up.Restart(), up.Notes())
	}
}

// Other resources of the same apply are applied as usual around a held
// muster line, each result in its spec's place.
func TestHeldVersionKeepsTheOtherResources(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHost(t)
	h.publish(t, testDeb(t, "1.0"), testDeb(t, "2.0"))
	h.install(t, "1.0")
	failed := Failed{{Version: "2.0", At: time.Now(), Reason: FailedCheck, Detail: "exit status 1"}}
	specs := []resource.Spec{
		{Kind: resource.File, Path: "/etc/before", Content: "a\n"},
		{Kind: resource.Package, Name: PackageName, Version: "2.0"},
		{Kind: resource.File, Path: "/etc/after", Content: "b\n"},
	}
	res := h.guard(failed).Apply(ctx, h.system(), specs)
	if len(res) != 3 || res[0].ID != "file:/etc/before" || res[1].ID != "package:muster" || res[2].ID != "file:/etc/after" {
		t.Fatalf("results out of place: %+v", res)
	}
	if res[0].Status != outcome.Changed || res[1].Status != outcome.Failed || res[2].Status != outcome.Changed {
		t.Errorf("statuses: %+v", res)
	}
	if got := mustRead(t, filepath.Join(h.root, "etc/after")); got != "b\n" {
		t.Errorf("/etc/after holds %q", got)
	}
}

// Story (3): a version that passes its self-check but will not start from
// the timer. The launcher the package installed counts three failed starts,
// restores the known-good binary and runs it; the apply that follows
// reinstalls the known-good version through apt, remembers the failed one
// and reports the rollback, and later applies do not try it again.
func TestLauncherRollsBackAVersionThatWillNotStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHost(t)
	h.publish(t, testDeb(t, "1.0"), testDeb(t, "4.0"))
	h.install(t, "1.0")
	bin := filepath.Join(h.root, BinaryPath)
	// The first apply that ran and reported blessed 1.0.
	if _, err := Bless(h.state, bin, "1.0"); err != nil {
		t.Fatal(err)
	}

	up := h.guard(nil)
	if res := up.Apply(ctx, h.system(), packageSpec("4.0")); res[0].Status != outcome.Changed || !up.Restart() {
		t.Fatalf("4.0 should pass its self-check: %+v", res[0])
	}

	// The timer's runs: the launcher as the package installed it.
	launch := func() (int, string) {
		cmd := exec.Command(filepath.Join(h.root, "usr/lib/muster/muster-launch"))
		cmd.Env = append(os.Environ(), "MUSTER_ROOT="+h.root, "MUSTER_STATE="+h.state,
			"MUSTER_CONFIG="+filepath.Join(h.state, "absent.toml"))
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	for i := 1; i <= 2; i++ {
		if code, out := launch(); code != 2 || !strings.Contains(out, "panic: runtime error") {
			t.Fatalf("start %d of 4.0: status %d, output:\n%s", i, code, out)
		}
	}
	code, out := launch()
	// The restored 1.0 ran apply and decided: this host has no config.
	if code != 1 || !strings.Contains(out, "muster 4.0 failed to start 3 times in a row; restored the known-good muster 1.0") ||
		!strings.Contains(out, "muster: error: host config") {
		t.Fatalf("third start: status %d, output:\n%s", code, out)
	}
	if !fileEqual(t, bin, musterBinary(t, "1.0")) {
		t.Fatal("/usr/bin/muster is not the known-good 1.0 after the rollback")
	}
	if v := h.installed(t); v != "4.0" {
		t.Fatalf("dpkg lists %s before the next apply, want 4.0 still", v)
	}

	// The next apply, by the restored binary.
	up = h.guard(up.Failed())
	res := up.Apply(ctx, h.system(), packageSpec("4.0"))
	if v := h.installed(t); v != "1.0" {
		t.Errorf("dpkg lists %s after the apply that follows the rollback, want 1.0", v)
	}
	if !fileEqual(t, bin, musterBinary(t, "1.0")) {
		t.Error("/usr/bin/muster is not 1.0 after apt reinstalled it")
	}
	want := "muster 4.0 failed to start 3 times in a row (exit status 2 (a Go panic, or the fixed command line refused): panic: runtime error: invalid memory address); rolled back to 1.0"
	lines := up.Lines()
	if len(lines) != 1 || lines[0].ID != RollbackLineID || lines[0].Status != outcome.Failed || lines[0].Detail != want {
		t.Errorf("rollback line %+v\nwant %q", lines, want)
	}
	if len(up.Notes()) != 1 || up.Notes()[0] != want+"; muster 1.0 reinstalled through apt" {
		t.Errorf("notes %q", up.Notes())
	}
	if res[0].Status != outcome.Failed || !strings.HasPrefix(res[0].Detail, "version 4.0 failed to start here on ") ||
		!strings.Contains(res[0].Detail, "3 failed starts in a row") {
		t.Errorf("package line %+v", res[0])
	}
	note := filepath.Join(h.state, RollbackNote)
	if _, err := os.Stat(note); err != nil {
		t.Fatal("the rollback note went before the state was saved")
	}
	if err := up.Saved(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(note); err == nil {
		t.Fatal("the rollback note is still there after the state was saved")
	}

	// Later applies: no rollback line, 4.0 still held.
	up = h.guard(up.Failed())
	res = up.Apply(ctx, h.system(), packageSpec("4.0"))
	if len(up.Lines()) != 0 || res[0].Status != outcome.Failed || h.installed(t) != "1.0" {
		t.Errorf("after the rollback: lines %+v, package %+v, dpkg %s", up.Lines(), res[0], h.installed(t))
	}
}
