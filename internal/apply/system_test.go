package apply_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/muster-tool/muster/internal/host"
	"github.com/muster-tool/muster/internal/resource/debian"
	"github.com/muster-tool/muster/internal/testutil/aptrepo"
)

const testPkg = "muster-test-apply"

func testPkgVersion(v string) aptrepo.Pkg {
	return aptrepo.Pkg{Name: testPkg, Version: v, Files: map[string]string{"/usr/share/" + testPkg + "/version": v + "\n"}}
}

// setApt points h's apt at repository options through the host config, as
// an operator does in muster.toml's [apt] table.
func setApt(t *testing.T, h *testHost, options []string) {
	t.Helper()
	cfg, err := host.LoadConfig(h.config)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Apt = host.AptConfig{Options: options, Update: true}
	if err := host.WriteConfig(h.config, cfg); err != nil {
		t.Fatal(err)
	}
}

// machineUntouched fails the test if the test package reached the machine
// running the tests instead of the scratch root.
func machineUntouched(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/usr/share/" + testPkg); err == nil {
		t.Errorf("/usr/share/%s exists on the machine itself", testPkg)
	}
	for _, f := range []string{"/var/lib/dpkg/status", "/var/log/dpkg.log"} {
		if b, err := os.ReadFile(f); err == nil && strings.Contains(string(b), testPkg) {
			t.Errorf("the machine's %s mentions %s", f, testPkg)
		}
	}
}

// Packages through this machine's real apt and dpkg, inside a scratch
// root, from a repository the test builds: install, upgrade, and a version
// no repository has, which fails its line with apt's own message and the
// apply with status 1.
func TestPackagesWithRealApt(t *testing.T) {
	repo := aptrepo.Build(t, filepath.Join(t.TempDir(), "repo"), []aptrepo.Pkg{testPkgVersion("1.0"), testPkgVersion("2.0")})
	t.Cleanup(func() { machineUntouched(t) })
	f := newFixture(t)
	h := f.enrol("web-1")
	setApt(t, h, repo.Options)
	installed := func() string {
		t.Helper()
		got, err := debian.New(h.root, debian.Options{}).Installed(context.Background(), []string{testPkg})
		if err != nil {
			t.Fatal(err)
		}
		return got[testPkg]
	}

	for _, step := range []struct{ name, version string }{{"install", "1.0"}, {"upgrade", "2.0"}} {
		f.declare(everyNode + "[role.all.package." + testPkg + "]\nversion = \"" + step.version + "\"\n")
		out, errs, code := h.run(t, "apply")
		if code != 0 || !strings.Contains(out, "changed  package:"+testPkg) {
			t.Fatalf("%s: status %d\n%s%s", step.name, code, out, errs)
		}
		if v := installed(); v != step.version {
			t.Fatalf("%s: the root's dpkg database says %q, want %s", step.name, v, step.version)
		}
		if got := readFile(t, filepath.Join(h.root, "usr/share", testPkg, "version")); got != step.version+"\n" {
			t.Fatalf("%s: the package's file under the root holds %q", step.name, got)
		}
	}

	f.declare(everyNode + "[role.all.package." + testPkg + "]\nversion = \"9.9\"\n")
	out, errs, code := h.run(t, "apply")
	want := "failed   package:" + testPkg + ": "
	if code != 1 || !strings.Contains(out, want) {
		t.Fatalf("missing version: status %d, want 1 and a failed line\n%s%s", code, out, errs)
	}
	if !strings.Contains(out, "Version '9.9' for '"+testPkg+"' was not found") {
		t.Errorf("the failed line does not carry apt's own message:\n%s", out)
	}
	if v := installed(); v != "2.0" {
		t.Errorf("after the failed install the root has %q, want 2.0 kept", v)
	}
	reps := f.reports(h)
	last := reps[len(reps)-1]
	if l := lineOf(t, last, "package:"+testPkg); l.Status != "failed" || !strings.Contains(l.Detail, "was not found") {
		t.Errorf("report line %s %q", l.Status, l.Detail)
	}
}

// A package no repository has, with the scratch root's empty sources: the
// line fails with apt's message and nothing else is held back.
func TestPackageNoRepositoryHas(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("apt and dpkg under a root need root")
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		t.Skip("apt-get not installed")
	}
	f := newFixture(t)
	h := f.enrol("web-1")
	f.declare(everyNode + "[role.all.package.muster-test-nowhere]\nversion = \"1.0-1\"\n\n[role.all.file.\"/etc/motd\"]\ncontent = \"hi\\n\"\n")
	out, errs, code := h.run(t, "apply")
	if code != 1 || !strings.Contains(out, "failed   package:muster-test-nowhere: ") || !strings.Contains(out, "Unable to locate package muster-test-nowhere") {
		t.Fatalf("status %d\n%s%s", code, out, errs)
	}
	if got := readFile(t, filepath.Join(h.root, "etc/motd")); got != "hi\n" {
		t.Errorf("the failed package held back the file: %q", got)
	}
}

const unit = `[Unit]
Description=muster test service

[Service]
ExecStart=/bin/true

[Install]
WantedBy=multi-user.target
`

// Services with the real `systemctl --root`: a unit file written by a file
// resource in the same apply is enabled after it, verified by reading the
// enablement back; disabling removes the link. Under a root, units cannot
// run, and the line says that running was not managed.
func TestServiceWithRealSystemctl(t *testing.T) {
	if _, err := exec.LookPath("systemctl"); err != nil {
		t.Skip("systemctl not installed")
	}
	f := newFixture(t)
	h := f.enrol("web-1")
	decl := func(enabled string) string {
		return everyNode + `
[role.all.service.muster-demo]
enabled = ` + enabled + `
running = ` + enabled + `

[role.all.file."/etc/systemd/system/muster-demo.service"]
content = """
` + unit + `"""
`
	}
	f.declare(decl("true"))
	out, errs, code := h.run(t, "apply")
	if code != 0 || !strings.Contains(out, "changed  service:muster-demo.service") || !strings.Contains(out, "changed  file:/etc/systemd/system/muster-demo.service") {
		t.Fatalf("enable: status %d\n%s%s", code, out, errs)
	}
	link := filepath.Join(h.root, "etc/systemd/system/multi-user.target.wants/muster-demo.service")
	if _, err := os.Lstat(link); err != nil {
		t.Fatalf("no wants link under the root: %v", err)
	}
	if out, _ := exec.Command("systemctl", "--root", h.root, "is-enabled", "muster-demo.service").Output(); strings.TrimSpace(string(out)) != "enabled" {
		t.Errorf("systemctl --root is-enabled says %q", out)
	}
	reps := f.reports(h)
	if l := lineOf(t, reps[0], "service:muster-demo.service"); !strings.Contains(l.Detail, "running is not managed") {
		t.Errorf("service line %q does not say that running is not managed under a root", l.Detail)
	}

	out, _, code = h.run(t, "apply")
	if code != 0 || !strings.Contains(out, "no change, 2 resources verified") {
		t.Errorf("second apply: status %d\n%s", code, out)
	}

	f.declare(decl("false"))
	if out, errs, code := h.run(t, "apply"); code != 0 || !strings.Contains(out, "changed  service:muster-demo.service") {
		t.Fatalf("disable: status %d\n%s%s", code, out, errs)
	}
	if _, err := os.Lstat(link); err == nil {
		t.Error("disabling left the wants link")
	}
}
