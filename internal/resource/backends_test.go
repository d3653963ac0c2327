package resource

// The package manager and init system here are small in-memory fakes of the
// Packages and Services interfaces. They exist only to test what this
// package decides: the order of work, how many backend calls are made, and
// how backend errors become lines. The real dpkg/apt and systemctl backends
// are tested against the real tools in internal/resource/debian and
// internal/resource/systemd.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/muster-tool/muster/internal/outcome"
)

type fakePackages struct {
	installed  map[string]string
	candidates map[string]string
	// broken names fail Install with an apt-like message and are not
	// installed; the rest of the call still installs.
	broken map[string]bool
	// lie makes Install report success without installing anything.
	lie   bool
	calls []string
	// onInstall runs at the start of Install.
	onInstall func()
	files     map[string][]string
}

func (f *fakePackages) Installed(_ context.Context, names []string) (map[string]string, error) {
	f.calls = append(f.calls, "installed "+strings.Join(names, ","))
	out := map[string]string{}
	for _, n := range names {
		if v, ok := f.installed[n]; ok {
			out[n] = v
		}
	}
	return out, nil
}

func (f *fakePackages) Candidate(_ context.Context, name string) (string, error) {
	f.calls = append(f.calls, "candidate "+name)
	v, ok := f.candidates[name]
	if !ok {
		return "", fmt.Errorf("package %s has no installation candidate", name)
	}
	return v, nil
}

func (f *fakePackages) Install(_ context.Context, want map[string]string) error {
	keys := slices.Sorted(maps.Keys(want))
	var parts []string
	for _, k := range keys {
		parts = append(parts, k+"="+want[k])
	}
	f.calls = append(f.calls, "install "+strings.Join(parts, ","))
	if f.onInstall != nil {
		f.onInstall()
	}
	if f.lie {
		return nil
	}
	var err error
	for _, k := range keys {
		if f.broken[k] {
			err = fmt.Errorf("E: Unable to locate package %s", k)
			continue
		}
		v := want[k]
		if v == "" {
			v = f.candidates[k]
		}
		f.installed[k] = v
	}
	return err
}

func (f *fakePackages) Remove(_ context.Context, names []string) error {
	f.calls = append(f.calls, "remove "+strings.Join(names, ","))
	for _, n := range names {
		delete(f.installed, n)
	}
	return nil
}

// Files says what a package holds: files maps "name version" to its
// paths; a package it does not know cannot be told without a download.
func (f *fakePackages) Files(_ context.Context, name, version string) ([]string, bool, error) {
	f.calls = append(f.calls, "files "+name+" "+version)
	paths, ok := f.files[name+" "+version]
	return paths, ok, nil
}

// CompareVersions orders versions of one digit each.
func (f *fakePackages) CompareVersions(_ context.Context, a, b string) (int, error) {
	return strings.Compare(a, b), nil
}

type fakeServices struct {
	canRun  bool
	enabled map[string]bool
	active  map[string]bool
	// dies names units that stop right after a restart.
	dies map[string]bool
	// stale names units systemd runs an older definition of, until the
	// next reload.
	stale map[string]bool
	// kept is systemd's own record of a unit's enablement where it
	// differs from the unit files (a link changed by hand), until the
	// next reload: what Look answers.
	kept         map[string]bool
	calls        []string
	looks, reads int // Look and Units calls
	// onCall runs at the start of every changing call.
	onCall func(call string)
}

func (f *fakeServices) Look(ctx context.Context, units []string) ([]UnitState, error) {
	f.looks++
	out, err := f.units(units)
	for i, unit := range units {
		if on, ok := f.kept[unit]; ok && out[i].Err == nil {
			out[i].Enabled = on
		}
	}
	return out, err
}

func (f *fakeServices) Units(_ context.Context, units []string) ([]UnitState, error) {
	f.reads++
	return f.units(units)
}

func (f *fakeServices) units(units []string) ([]UnitState, error) {
	out := make([]UnitState, len(units))
	for i, unit := range units {
		if unit == "missing.service" {
			out[i].Err = errors.New("Failed to get unit file state for missing.service: No such file or directory")
			continue
		}
		out[i].Enabled = f.enabled[unit]
		if f.canRun {
			out[i].Active, out[i].Stale = f.active[unit], f.stale[unit]
		}
	}
	return out, nil
}

func (f *fakeServices) Reload(context.Context) error {
	f.record("reload")
	clear(f.stale)
	clear(f.kept)
	return nil
}

func (f *fakeServices) UnitFile(path string) bool {
	return strings.HasPrefix(path, "/etc/systemd/system/")
}

func (f *fakeServices) SetEnabled(_ context.Context, unit string, on bool) error {
	f.record(fmt.Sprintf("enable %s %v", unit, on))
	f.enabled[unit] = on
	delete(f.kept, unit) // systemctl enable and disable reload
	return nil
}

func (f *fakeServices) CanRun() bool { return f.canRun }

func (f *fakeServices) SetRunning(_ context.Context, unit string, on bool) error {
	f.record(fmt.Sprintf("run %s %v", unit, on))
	f.active[unit] = on
	return nil
}

func (f *fakeServices) Restart(_ context.Context, unit string) error {
	f.record("restart " + unit)
	f.active[unit] = !f.dies[unit]
	return nil
}

func (f *fakeServices) record(call string) {
	if f.onCall != nil {
		f.onCall(call)
	}
	f.calls = append(f.calls, call)
}

func newFakes() (*fakePackages, *fakeServices) {
	return &fakePackages{installed: map[string]string{}, candidates: map[string]string{}, broken: map[string]bool{}, files: map[string][]string{}},
		&fakeServices{canRun: true, enabled: map[string]bool{}, active: map[string]bool{}, dies: map[string]bool{}, stale: map[string]bool{}}
}

// Packages go first, with one Installed query and one Install call for all
// of them; then files; then services, which see the files already written.
func TestApplyDefaultOrderAndOneInstall(t *testing.T) {
	root := newRoot(t)
	pk, sv := newFakes()
	pk.candidates = map[string]string{"nginx": "1.24", "curl": "8.1", "jq": "1.7"}
	pk.installed["jq"] = "1.6"
	pk.installed["telnet"] = "0.17"
	pk.onInstall = func() {
		if exists(root, "/etc/nginx/nginx.conf") {
			t.Error("a file was written before packages were installed")
		}
	}
	sv.onCall = func(call string) {
		if !exists(root, "/etc/nginx/nginx.conf") {
			t.Errorf("%s ran before the files were written", call)
		}
	}
	specs := []Spec{
		{Kind: Service, Name: "nginx.service", Enabled: ptr(true), Running: ptr(true)},
		file("/etc/nginx/nginx.conf", "events {}\n"),
		{Kind: Package, Name: "nginx", Version: "present"},
		{Kind: Package, Name: "curl", Version: "8.1"},
		{Kind: Package, Name: "jq", Version: "latest"},
		{Kind: Package, Name: "telnet", Version: "absent"},
	}
	res := apply(t, &System{Root: root, Packages: pk, Services: sv}, specs...)
	for _, sp := range specs {
		wantStatus(t, res, sp.ID(), map[bool]outcome.Status{true: outcome.Removed, false: outcome.Changed}[sp.Version == "absent"])
	}
	wantCalls := []string{
		"installed nginx,curl,jq,telnet",
		"candidate jq",
		"install curl=8.1,jq=1.7,nginx=",
		"remove telnet",
		"installed nginx,curl,jq,telnet", // read-back
	}
	if !slices.Equal(pk.calls, wantCalls) {
		t.Errorf("package calls:\n%s\nwant:\n%s", strings.Join(pk.calls, "\n"), strings.Join(wantCalls, "\n"))
	}
	// Packages may ship unit files: systemd reads them again first.
	if !slices.Equal(sv.calls, []string{"reload", "enable nginx.service true", "run nginx.service true"}) {
		t.Errorf("service calls %q", sv.calls)
	}
	if !res["package:nginx"].Created || res["package:jq"].Created {
		t.Error("Created must be true only for packages that were not installed")
	}
	if d := res["package:jq"].Detail; d != "version 1.6 → 1.7" {
		t.Errorf("upgrade detail %q", d)
	}
}

// Order moves a resource: here the package source file is written before
// the package that needs it is installed.
func TestApplyOrderOverride(t *testing.T) {
	root := newRoot(t)
	pk, _ := newFakes()
	pk.candidates["muster"] = "2.0"
	pk.onInstall = func() {
		if !exists(root, "/etc/apt/sources.list.d/muster.list") {
			t.Error("package installed before its source file, despite order")
		}
	}
	res := apply(t, &System{Root: root, Packages: pk},
		Spec{Kind: Package, Name: "muster", Version: "2.0"},
		Spec{Kind: File, Path: "/etc/apt/sources.list.d/muster.list", Content: "deb file:/srv/repo ./\n", Order: 50},
	)
	wantStatus(t, res, "package:muster", outcome.Changed)
	wantStatus(t, res, "file:/etc/apt/sources.list.d/muster.list", outcome.Changed)
}

// A failed Install fails exactly the lines that did not reach their state,
// with the package manager's message; the others are verified and pass.
func TestApplyInstallFailureMapsToLines(t *testing.T) {
	root := newRoot(t)
	pk, _ := newFakes()
	pk.broken["nosuchpkg"] = true
	pk.installed["already"] = "1"
	res := apply(t, &System{Root: root, Packages: pk},
		Spec{Kind: Package, Name: "good", Version: "3.1"},
		Spec{Kind: Package, Name: "nosuchpkg"},
		Spec{Kind: Package, Name: "already"},
		Spec{Kind: Package, Name: "fresh", Version: "latest"},
	)
	wantStatus(t, res, "package:good", outcome.Changed)
	wantStatus(t, res, "package:already", outcome.OK)
	r := wantStatus(t, res, "package:nosuchpkg", outcome.Failed)
	if !strings.Contains(r.Detail, "E: Unable to locate package nosuchpkg") || !strings.Contains(r.Detail, "not installed") {
		t.Errorf("failed install detail %q", r.Detail)
	}
	if r := wantStatus(t, res, "package:fresh", outcome.Failed); !strings.Contains(r.Detail, "no installation candidate") {
		t.Errorf("candidate failure detail %q", r.Detail)
	}
}

// A backend that claims success without doing the work cannot make a line
// pass: the read-back catches it.
func TestApplyPackageReadBackCatchesLyingBackend(t *testing.T) {
	pk, _ := newFakes()
	pk.lie = true
	res := apply(t, &System{Root: newRoot(t), Packages: pk}, Spec{Kind: Package, Name: "vim", Version: "9.0"})
	if r := wantStatus(t, res, "package:vim", outcome.Failed); r.Detail != "read back: not installed" {
		t.Errorf("detail %q", r.Detail)
	}
}

func TestApplyWithoutBackends(t *testing.T) {
	res := apply(t, &System{Root: newRoot(t)},
		Spec{Kind: Package, Name: "vim"},
		Spec{Kind: Service, Name: "x.service", Enabled: ptr(true)},
	)
	wantStatus(t, res, "package:vim", outcome.Failed)
	wantStatus(t, res, "service:x.service", outcome.Failed)
}

func TestApplyRestartsOnChangedFile(t *testing.T) {
	root := newRoot(t)
	_, sv := newFakes()
	sv.active["web.service"] = true
	sv.active["idle.service"] = false
	conf := file("/etc/web.conf", "v1")
	web := Spec{Kind: Service, Name: "web.service", RestartOn: []string{"/etc/web.conf"}}
	idle := Spec{Kind: Service, Name: "idle.service", RestartOn: []string{"/etc/web.conf"}}
	s := &System{Root: root, Services: sv}

	res := apply(t, s, web, idle, conf)
	if r := wantStatus(t, res, web.ID(), outcome.Changed); r.Detail != "restarted (/etc/web.conf changed)" {
		t.Errorf("restart detail %q", r.Detail)
	}
	wantStatus(t, res, idle.ID(), outcome.OK) // not running, not declared running: left stopped
	if !slices.Equal(sv.calls, []string{"restart web.service"}) {
		t.Errorf("calls %q", sv.calls)
	}

	sv.calls = nil
	res = apply(t, s, web, idle, conf)
	wantStatus(t, res, web.ID(), outcome.OK)
	if len(sv.calls) != 0 {
		t.Errorf("restarted although nothing changed: %q", sv.calls)
	}

	// A restart after which the unit is not running fails the line.
	sv.dies["web.service"] = true
	res = apply(t, s, web, file("/etc/web.conf", "v2"))
	if r := wantStatus(t, res, web.ID(), outcome.Failed); !strings.Contains(r.Detail, "not running after restart") {
		t.Errorf("detail %q", r.Detail)
	}
}

// What starts must be what is declared: a changed unit file or drop-in is
// followed by a reload of systemd before the unit is started or restarted,
// once however many changed; a unit that needs a reload at the first look
// is reloaded and its line says so; one that still needs a reload at the
// read-back fails, never verified; and a run that changes nothing looks
// at the units once and reads them back once, and reloads nothing.
func TestApplyReloadsChangedUnits(t *testing.T) {
	root := newRoot(t)
	_, sv := newFakes()
	sv.active["web.service"] = true
	unit := file("/etc/systemd/system/web.service", "[Service]\nExecStart=/bin/web\n")
	dropIn := file("/etc/systemd/system/web.service.d/colour.conf", "[Service]\nEnvironment=COLOUR=blue\n")
	conf := file("/etc/web.conf", "v1")
	web := Spec{Kind: Service, Name: "web.service", Enabled: ptr(true), Running: ptr(true),
		RestartOn: []string{"/etc/web.conf", "/etc/systemd/system/web.service.d/colour.conf"}}
	s := &System{Root: root, Services: sv}

	res := apply(t, s, web, unit, dropIn, conf)
	wantStatus(t, res, web.ID(), outcome.Changed)
	want := []string{"reload", "enable web.service true", "restart web.service"}
	if !slices.Equal(sv.calls, want) {
		t.Errorf("calls %q, want %q", sv.calls, want)
	}

	sv.calls, sv.looks, sv.reads = nil, 0, 0
	res = apply(t, s, web, unit, dropIn, conf)
	wantStatus(t, res, web.ID(), outcome.OK)
	if len(sv.calls) != 0 || sv.looks != 1 || sv.reads != 1 {
		t.Errorf("a run that changes nothing: calls %q, %d looks and %d reads, want none, 1 and 1", sv.calls, sv.looks, sv.reads)
	}

	// Only the config changed: restarted, not reloaded.
	sv.calls = nil
	apply(t, s, web, unit, dropIn, file("/etc/web.conf", "v2"))
	if !slices.Equal(sv.calls, []string{"restart web.service"}) {
		t.Errorf("calls %q", sv.calls)
	}

	// The drop-in changed: reloaded, then restarted.
	sv.calls = nil
	dropIn.Content = "[Service]\nEnvironment=COLOUR=green\n"
	apply(t, s, web, unit, dropIn, conf)
	if !slices.Equal(sv.calls, []string{"reload", "restart web.service"}) {
		t.Errorf("calls %q", sv.calls)
	}

	// Edited by hand: systemd runs an older definition at the first look.
	sv.calls = nil
	sv.stale["web.service"] = true
	res = apply(t, s, web, unit, dropIn, conf)
	if r := wantStatus(t, res, web.ID(), outcome.Changed); !strings.Contains(r.Detail, "reloaded") {
		t.Errorf("detail %q", r.Detail)
	}
	if !slices.Equal(sv.calls, []string{"reload"}) {
		t.Errorf("calls %q", sv.calls)
	}

	// Still stale when read back: failed, whatever else matches.
	s.beforeReadBack = func() { sv.stale["web.service"] = true }
	res = apply(t, s, web, unit, dropIn, conf)
	if r := wantStatus(t, res, web.ID(), outcome.Failed); !strings.Contains(r.Detail, "NeedDaemonReload=yes") || r.Digest != "" {
		t.Errorf("a unit that needs a reload: %+v", r)
	}
}

// Where units cannot run: under a root other than / only enablement is
// managed and the line says so; on the live system a declared running
// state that cannot be reached fails.
func TestApplyServicesWhereUnitsCannotRun(t *testing.T) {
	_, sv := newFakes()
	sv.canRun = false
	both := Spec{Kind: Service, Name: "a.service", Enabled: ptr(true), Running: ptr(true)}
	onlyRunning := Spec{Kind: Service, Name: "b.service", Running: ptr(true)}

	res := apply(t, &System{Root: newRoot(t), Services: sv}, both, onlyRunning)
	if r := wantStatus(t, res, both.ID(), outcome.Changed); !strings.Contains(r.Detail, "enabled; running is not managed") {
		t.Errorf("image root detail %q", r.Detail)
	}
	if r := wantStatus(t, res, onlyRunning.ID(), outcome.Failed); !strings.Contains(r.Detail, "nothing here can be verified") {
		t.Errorf("nothing-verifiable detail %q", r.Detail)
	}
	if !sv.enabled["a.service"] {
		t.Error("not enabled")
	}

	// The live system, with no file resources, so nothing is written.
	res = apply(t, &System{Root: "/", Services: sv}, both)
	if r := wantStatus(t, res, both.ID(), outcome.Failed); !strings.Contains(r.Detail, "units cannot be started here") {
		t.Errorf("live detail %q", r.Detail)
	}
}

func TestApplyServiceBackendError(t *testing.T) {
	_, sv := newFakes()
	res := apply(t, &System{Root: newRoot(t), Services: sv}, Spec{Kind: Service, Name: "missing.service", Enabled: ptr(true)})
	if r := wantStatus(t, res, "service:missing.service", outcome.Failed); !strings.Contains(r.Detail, "No such file or directory") {
		t.Errorf("detail %q", r.Detail)
	}
}

func TestApplyDryRunBackends(t *testing.T) {
	root := newRoot(t)
	pk, sv := newFakes()
	pk.installed["old"] = "1"
	pk.candidates["new"] = "2"
	sv.active["web.service"] = true
	specs := []Spec{
		{Kind: Package, Name: "new", Version: "latest"},
		{Kind: Package, Name: "old", Version: "absent"},
		{Kind: Service, Name: "web.service", Enabled: ptr(true), RestartOn: []string{"/etc/web.conf"}},
		file("/etc/web.conf", "x"),
	}
	res := apply(t, &System{Root: root, Packages: pk, Services: sv, DryRun: true}, specs...)
	if r := wantStatus(t, res, "package:new", outcome.Changed); r.Detail != "would install new 2" {
		t.Errorf("detail %q", r.Detail)
	}
	wantStatus(t, res, "package:old", outcome.Removed)
	if r := wantStatus(t, res, "service:web.service", outcome.Changed); r.Detail != "would enable, restart (/etc/web.conf would change)" {
		t.Errorf("detail %q", r.Detail)
	}
	for _, c := range pk.calls {
		if strings.HasPrefix(c, "install ") || strings.HasPrefix(c, "remove ") {
			t.Errorf("dry run called %s", c)
		}
	}
	if len(sv.calls) != 0 || exists(root, "/etc/web.conf") {
		t.Errorf("dry run changed something: %q", sv.calls)
	}
}

// A dry run names the versions a package would go to, and a service
// whose unit a package of the same run brings is what the run would do,
// not a unit not found; a missing unit no package of the run brings still
// fails.
func TestApplyDryRunPackageBringsUnit(t *testing.T) {
	root := newRoot(t)
	pk, sv := newFakes()
	pk.installed["up"] = "1"
	pk.installed["down"] = "5"
	pk.candidates["missing"] = "3"
	pk.files["missing 3"] = []string{"/usr/bin/missingd", "/lib/systemd/system/missing.service"}
	specs := []Spec{
		{Kind: Package, Name: "missing"},
		{Kind: Package, Name: "up", Version: "2"},
		{Kind: Package, Name: "down", Version: "4"},
		{Kind: Service, Name: "missing.service", Enabled: ptr(true), Running: ptr(true)},
	}
	res := apply(t, &System{Root: root, Packages: pk, Services: sv, DryRun: true}, specs...)
	for id, want := range map[string]string{
		"package:missing":         "would install missing 3",
		"package:up":              "would upgrade up 1 → 2",
		"package:down":            "would downgrade down 5 → 4",
		"service:missing.service": "would enable and start missing.service (its unit comes with package missing 3, which this run installs)",
	} {
		if r := wantStatus(t, res, id, outcome.Changed); r.Detail != want {
			t.Errorf("%s: detail %q, want %q", id, r.Detail, want)
		}
	}

	// Files the backend cannot read without a download: it may.
	delete(pk.files, "missing 3")
	res = apply(t, &System{Root: root, Packages: pk, Services: sv, DryRun: true}, specs...)
	if r := wantStatus(t, res, "service:missing.service", outcome.Changed); !strings.Contains(r.Detail, "if package missing 3, which this run installs, brings its unit") {
		t.Errorf("detail %q", r.Detail)
	}

	// Known files without the unit: the missing unit fails the line.
	pk.files["missing 3"] = []string{"/usr/bin/missingd"}
	res = apply(t, &System{Root: root, Packages: pk, Services: sv, DryRun: true}, specs...)
	if r := wantStatus(t, res, "service:missing.service", outcome.Failed); !strings.Contains(r.Detail, "No such file or directory") {
		t.Errorf("detail %q", r.Detail)
	}

	// Installed already: nothing of the run brings it.
	pk.installed["missing"] = "3"
	pk.files["missing 3"] = []string{"/lib/systemd/system/missing.service"}
	res = apply(t, &System{Root: root, Packages: pk, Services: sv, DryRun: true}, specs...)
	wantStatus(t, res, "service:missing.service", outcome.Failed)
	wantStatus(t, res, "package:missing", outcome.OK)
}

func TestRemoveOrphanPackagesWithPrune(t *testing.T) {
	pk, _ := newFakes()
	pk.installed["old"] = "1"
	s := &System{Root: newRoot(t), Packages: pk, Prune: true}
	res := s.RemoveAll(context.Background(), []Spec{{Kind: Package, Name: "old"}, {Kind: Package, Name: "gone"}})
	if res[0].Status != outcome.Removed || res[1].Status != outcome.OK || res[1].Detail != "already absent" {
		t.Errorf("results %+v", res)
	}
	if _, ok := pk.installed["old"]; ok {
		t.Error("orphan package still installed")
	}
}

// A cancelled run changes nothing more but still reads everything back.
func TestApplyCancelled(t *testing.T) {
	root := newRoot(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := (&System{Root: root}).Apply(ctx, []Spec{file("/etc/x", "x")})
	if res[0].Status != outcome.Failed || !strings.Contains(res[0].Detail, "context canceled") {
		t.Errorf("%+v", res[0])
	}
	if _, err := os.Lstat(filepath.Join(root, "etc/x")); err == nil {
		t.Error("a cancelled run wrote a file")
	}
}

// A link changed by hand leaves systemd's record of the unit stale until
// a reload: the look, which takes that record, finds the unit as
// declared, the read-back, which reads the unit files, does not. The
// unit is enabled (or disabled) then and read back again: the drift is
// repaired in this run, and the next run finds nothing to do.
func TestApplyServiceLinkChangedByHand(t *testing.T) {
	_, sv := newFakes()
	sv.canRun = true
	sv.active["web.service"] = true
	s := &System{Root: newRoot(t), Services: sv}
	web := Spec{Kind: Service, Name: "web.service", Enabled: ptr(true), Running: ptr(true)}
	other := Spec{Kind: Service, Name: "other.service", Enabled: ptr(false)}
	sv.enabled["other.service"] = true // its link made by hand
	sv.kept = map[string]bool{"web.service": true, "other.service": false}

	res := apply(t, s, web, other)
	if r := wantStatus(t, res, web.ID(), outcome.Changed); !strings.Contains(r.Detail, "enabled (found disabled by the read-back: a link changed by hand)") {
		t.Errorf("web: %q", r.Detail)
	}
	if r := wantStatus(t, res, other.ID(), outcome.Changed); !strings.Contains(r.Detail, "disabled (found enabled by the read-back") {
		t.Errorf("other: %q", r.Detail)
	}
	if want := []string{"enable web.service true", "enable other.service false"}; !slices.Equal(sv.calls, want) {
		t.Errorf("calls %q, want %q", sv.calls, want)
	}
	if sv.reads != 2 {
		t.Errorf("%d reads, want the read-back and one more of the units changed after it", sv.reads)
	}

	sv.calls = nil
	res = apply(t, s, web, other)
	wantStatus(t, res, web.ID(), outcome.OK)
	wantStatus(t, res, other.ID(), outcome.OK)
	if len(sv.calls) != 0 {
		t.Errorf("the next run: calls %q, want none", sv.calls)
	}
}
