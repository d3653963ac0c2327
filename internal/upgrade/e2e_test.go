package upgrade

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/muster-tool/muster/internal/host"
	"github.com/muster-tool/muster/internal/repo"
	"github.com/muster-tool/muster/internal/resource/debian"
)

// TestDeliveredByTheSamePath is the whole story with real parts only: the
// real muster command line on both sides, packages built by scripts/deb.sh
// and published with muster spool repo add, real apt and dpkg in a scratch
// root, and the launcher the package installs running apply as the timer
// would:
//
//  1. muster 1.0 installs itself, passes its self-check, is blessed
//     known-good by its first report; 1.1 is declared, installed, passes,
//     and the next report carries muster 1.1;
//  2. 2.0, whose binary exits at once, fails its self-check: the apply fails
//     saying why, and 1.1 is back;
//  3. 4.0 passes its self-check but panics when the timer starts it: after
//     three failed starts the launcher restores 1.1, and the report of the
//     apply that follows says so.
func TestDeliveredByTheSamePath(t *testing.T) {
	t.Parallel()
	needRoot(t)
	ctx := context.Background()
	v10 := musterBinary(t, "1.0")
	if help, _ := exec.Command(v10, "help", "apply").Output(); !strings.Contains(string(help), "--self-check") {
		t.Skip("muster apply --self-check is not wired in yet")
	}
	if err := exec.Command(v10, "help", "spool", "repo", "add").Run(); err != nil {
		t.Skip("muster spool repo add is not wired in yet")
	}

	s := newSite(t, "")
	root := t.TempDir()
	cfg, err := host.LoadConfig(s.config)
	if err != nil {
		t.Fatal(err)
	}
	// A scratch root: apt reads only the root's sources, and downloads
	// as root from the test's private directories.
	cfg.Apt = host.AptConfig{Update: true, Options: []string{"Acquire::Languages=none", "APT::Sandbox::User=root"}}
	if err := host.WriteConfig(s.config, cfg); err != nil {
		t.Fatal(err)
	}
	repoDir := filepath.Join(root, "var/lib/muster/repo")
	declare := func(version string) {
		t.Helper()
		s.declare(t, `[role.muster]
nodes = ["*"]

[role.muster.file."/etc/apt/sources.list.d/muster.list"]
content = "`+repo.SourcesLine(repoDir)+`\n"
order = 10

[role.muster.package.muster]
version = "`+version+`"
order = 20
`)
	}
	publish := func(versions ...string) {
		t.Helper()
		args := []string{"spool", "repo", "add", "--mesh", s.mesh}
		for _, v := range versions {
			args = append(args, e2eDeb(t, v))
		}
		s.run(t, "", args...)
	}
	dpkg := debian.New(root, debian.Options{})
	installed := func() string {
		t.Helper()
		got, err := dpkg.Installed(ctx, []string{PackageName})
		if err != nil {
			t.Fatal(err)
		}
		return got[PackageName]
	}
	// launch runs the launcher the package installed, as the timer does.
	launch := func(want int) string {
		t.Helper()
		cmd := exec.Command(filepath.Join(root, "usr/lib/muster/muster-launch"))
		cmd.Env = append(os.Environ(), "MUSTER_ROOT="+root, "MUSTER_CONFIG="+s.config, "MUSTER_SPOOL=", "MUSTER_MESH=")
		out, err := cmd.CombinedOutput()
		got := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			got = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("launcher exited %d, want %d:\n%s", got, want, out)
		}
		return string(out)
	}
	hadMachine := machineMuster()
	defer func() {
		if now := machineMuster(); now != hadMachine {
			t.Errorf("the machine's own dpkg lists muster %q, before the test %q", now, hadMachine)
		}
	}()

	// (1) The first install, by a muster that is not a package yet.
	publish("1.0", "1.1")
	declare("1.0")
	cmd := exec.Command(v10, "apply", "--config", s.config, "--root", root)
	cmd.Env = append(os.Environ(), "MUSTER_SPOOL=", "MUSTER_MESH=")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 || !strings.Contains(string(out), "note: muster 1.0 installed and passed its self-check; it runs from the next apply") {
		t.Fatalf("first install: %v\n%s", err, out)
	}
	launch(0)
	if v, _ := KnownGoodVersion(s.state); v != "1.0" {
		t.Fatalf("known-good muster %q after the first report of the installed 1.0, want 1.0", v)
	}
	declare("1.1")
	out2 := launch(0)
	if !strings.Contains(out2, "running apply with it") || installed() != "1.1" {
		t.Fatalf("upgrade to 1.1: dpkg lists %s\n%s", installed(), out2)
	}
	node := s.report(t)
	if node.Status != "applied" || node.Report.Muster != "1.1" {
		t.Fatalf("after the upgrade: %+v, want applied by muster 1.1", node)
	}
	if v, _ := KnownGoodVersion(s.state); v != "1.1" {
		t.Errorf("known-good muster %q after 1.1 reported, want 1.1", v)
	}

	// (2) A version whose binary exits at once.
	publish("2.0")
	declare("2.0")
	launch(1)
	if v := installed(); v != "1.1" {
		t.Fatalf("dpkg lists %s after 2.0 failed its self-check, want 1.1", v)
	}
	node = s.report(t)
	if node.Status != "failed" || !node.failed("package:muster", "muster 2.0 was installed but", "exit status 1: muster: error: this build cannot start", "reinstalled muster 1.1") {
		t.Fatalf("after 2.0: %+v", node)
	}
	if !node.noted("muster 2.0 failed its self-check") {
		t.Errorf("notes %q", node.Report.Notes)
	}

	// (3) A version that passes its check and will not start.
	publish("4.0")
	declare("4.0")
	launch(2) // 1.1 installs 4.0, which passes; the launcher runs it at once: it panics
	launch(2)
	out3 := launch(1) // the third failed start rolls back; the restored 1.1 applies and reports
	if !strings.Contains(out3, "muster 4.0 failed to start 3 times in a row; restored the known-good muster 1.1") {
		t.Fatalf("third start:\n%s", out3)
	}
	if v := installed(); v != "1.1" {
		t.Fatalf("dpkg lists %s after the rollback, want 1.1", v)
	}
	node = s.report(t)
	if node.Status != "failed" || node.Report.Muster != "1.1" ||
		!node.failed(RollbackLineID, "muster 4.0 failed to start 3 times in a row", "panic: runtime error", "rolled back to 1.1") ||
		!node.failed("package:muster", "version 4.0 failed to start here on") {
		t.Fatalf("after the rollback: %+v", node)
	}
	if !node.noted("muster 4.0 failed to start 3 times in a row") {
		t.Errorf("notes %q", node.Report.Notes)
	}
	// From now on 4.0 is not tried, and the rollback is reported once.
	launch(1)
	node = s.report(t)
	if node.failed(RollbackLineID) || !node.failed("package:muster", "not retried until a newer version is declared") {
		t.Errorf("the apply after: %+v", node)
	}
	if v := installed(); v != "1.1" {
		t.Errorf("dpkg lists %s, want 1.1", v)
	}
}

// e2eDeb: a real muster 1.1 besides the packages of testDeb.
func e2eDeb(t *testing.T, version string) string {
	t.Helper()
	if version == "1.1" {
		return musterDeb(t, version, musterBinary(t, "1.1"))
	}
	return testDeb(t, version)
}

type reportNode struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Report *struct {
		Muster string   `json:"muster"`
		Notes  []string `json:"notes"`
	} `json:"report"`
	FailedLines []struct {
		ID     string `json:"id"`
		Detail string `json:"detail"`
	} `json:"failed_lines"`
}

// report is the mesh's view of the site's one node.
func (s *site) report(t *testing.T) reportNode {
	t.Helper()
	cmd := exec.Command(s.muster, "report", "--mesh", s.mesh, "--json", "--all", "--fail-on", "none")
	cmd.Env = append(os.Environ(), "MUSTER_SPOOL=", "MUSTER_MESH=")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("muster report: %v", err)
	}
	var doc struct {
		Nodes []reportNode `json:"nodes"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("muster report --json: %v\n%s", err, out)
	}
	if len(doc.Nodes) != 1 || doc.Nodes[0].Report == nil {
		t.Fatalf("muster report: %s", out)
	}
	return doc.Nodes[0]
}

// failed reports whether the node has a failed line id whose detail says
// each of says.
func (n reportNode) failed(id string, says ...string) bool {
	for _, l := range n.FailedLines {
		if l.ID != id {
			continue
		}
		for _, s := range says {
			if !strings.Contains(l.Detail, s) {
				return false
			}
		}
		return true
	}
	return false
}

func (n reportNode) noted(what string) bool {
	for _, note := range n.Report.Notes {
		if strings.Contains(note, what) {
			return true
		}
	}
	return false
}
