package resource

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/muster-tool/muster/internal/atomicfile"
	"github.com/muster-tool/muster/internal/outcome"
)

// What a killed run leaves beside the files it was replacing is removed by
// the next run told to sweep, and nothing else is.
func TestSweepTempsAfterAKilledRun(t *testing.T) {
	specs := []Spec{
		file("/etc/app/app.conf", "listen = 80\n"),
		{Kind: Symlink, Path: "/etc/app/current", Target: "app.conf"},
		{Kind: Directory, Path: "/etc/app/conf.d"},
	}
	left := []string{
		".muster-tmp-app.conf-0123456789abcdef", // a staged file
		".muster-tmp-current-fedcba9876543210",  // a staged symlink
	}
	kept := []string{
		".muster-tmp-other.conf-0123456789abcdef", // not declared here
		".muster-tmp-app.conf-0123456789abcdeZ",   // not a name muster gives
		".muster-tmp-conf.d-0123456789abcdef",     // beside a directory, which is never staged
		"app.conf.bak",
	}
	for _, sweep := range []bool{false, true} {
		root := newRoot(t)
		s := &System{Root: root}
		apply(t, s, specs...)
		for _, n := range append(append([]string{}, left...), kept...) {
			write(t, root, "/etc/app/"+n, "half written")
		}
		if err := os.Symlink("app.conf", filepath.Join(root, "etc/app/.muster-tmp-current-0000000000000000")); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(filepath.Join(root, "etc/app/.muster-tmp-app.conf-1111111111111111"), 0o755); err != nil {
			t.Fatal(err)
		}
		s.SweepTemps = sweep
		for _, r := range apply(t, s, specs...) {
			if r.Status != outcome.OK {
				t.Errorf("%s: %s %q", r.ID, r.Status, r.Detail)
			}
		}
		for _, n := range append(left, ".muster-tmp-current-0000000000000000") {
			if exists(root, "/etc/app/"+n) == sweep {
				t.Errorf("sweep=%v: %s exists: %v", sweep, n, !sweep)
			}
		}
		for _, n := range append(kept, ".muster-tmp-app.conf-1111111111111111") {
			if !exists(root, "/etc/app/"+n) {
				t.Errorf("sweep=%v: %s was removed", sweep, n)
			}
		}
	}
}

// A dry run sweeps nothing.
func TestDryRunSweepsNothing(t *testing.T) {
	root := newRoot(t)
	write(t, root, "/etc/.muster-tmp-motd-0123456789abcdef", "half written")
	s := &System{Root: root, DryRun: true, SweepTemps: true}
	apply(t, s, file("/etc/motd", "hello\n"))
	if !exists(root, "/etc/.muster-tmp-motd-0123456789abcdef") {
		t.Error("a dry run removed a temp file")
	}
}

// BeforeStaging runs once, before the first temp file, and only in a run
// that stages one; its error fails what needed it, and nothing is staged.
func TestBeforeStaging(t *testing.T) {
	root := newRoot(t)
	calls := 0
	var fail error
	s := &System{Root: root, BeforeStaging: func() error {
		calls++
		if names, err := atomicfile.Temps(filepath.Join(root, "etc")); err != nil || len(names) != 0 {
			t.Errorf("temp files %q exist before BeforeStaging ran (%v)", names, err)
		}
		return fail
	}}
	specs := []Spec{file("/etc/a", "a\n"), file("/etc/b", "b\n"), {Kind: Symlink, Path: "/etc/l", Target: "a"}}
	apply(t, s, specs...)
	if calls != 1 {
		t.Errorf("BeforeStaging ran %d times in a run that staged three paths, want 1", calls)
	}
	apply(t, s, specs...)
	if calls != 1 {
		t.Errorf("BeforeStaging ran in a run that staged nothing")
	}
	fail = os.ErrPermission
	res := apply(t, s, file("/etc/c", "c\n"))
	if r := wantStatus(t, res, "file:/etc/c", outcome.Failed); exists(root, "/etc/c") {
		t.Errorf("staged although BeforeStaging failed (%q)", r.Detail)
	}
}
