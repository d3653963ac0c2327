package resource

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/muster-tool/muster/internal/outcome"
)

// A purge directory keeps what is declared and what the host owns, and
// loses the rest, deepest first, named in its line; the read-back finds
// anything put back, and a dry run names what it would purge.
func TestPurgeRemovesWhatIsNeitherDeclaredNorOwned(t *testing.T) {
	root := newRoot(t)
	for _, p := range []string{"/srv/www/stray.html", "/srv/www/old/a.html", "/srv/www/old/deep/b.html", "/srv/www/assets/stray.css", "/srv/www/owned.html"} {
		write(t, root, p, "x")
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(root, "srv/www/link")); err != nil {
		t.Fatal(err)
	}
	www := Spec{Kind: Directory, Path: "/srv/www", Purge: true}
	specs := []Spec{www,
		file("/srv/www/index.html", "<h1>hi</h1>"),
		{Kind: Directory, Path: "/srv/www/assets"},
		file("/srv/www/assets/site.css", "body{}"),
		{Kind: Symlink, Path: "/srv/www/home", Target: "index.html"},
	}
	owns := func(id string) bool { return id == "file:/srv/www/owned.html" }

	before := snapshot(t, root)
	res := apply(t, &System{Root: root, DryRun: true, Owns: owns}, specs...)
	want := "would purge 4 paths neither declared nor owned: /srv/www/assets/stray.css, /srv/www/link, /srv/www/old/, /srv/www/stray.html"
	if r := wantStatus(t, res, www.ID(), outcome.Changed); r.Detail != want {
		t.Errorf("dry run detail %q, want %q", r.Detail, want)
	}
	if snapshot(t, root) != before {
		t.Fatal("a dry run purged")
	}

	res = apply(t, &System{Root: root, Owns: owns}, specs...)
	r := wantStatus(t, res, www.ID(), outcome.Changed)
	if r.Detail != "purged 4 paths neither declared nor owned: /srv/www/assets/stray.css, /srv/www/link, /srv/www/old/, /srv/www/stray.html" {
		t.Errorf("detail %q", r.Detail)
	}
	for _, p := range []string{"/srv/www/stray.html", "/srv/www/old", "/srv/www/assets/stray.css", "/srv/www/link"} {
		if exists(root, p) {
			t.Errorf("%s not purged", p)
		}
	}
	for _, p := range []string{"/srv/www/index.html", "/srv/www/assets/site.css", "/srv/www/home", "/srv/www/owned.html", "/etc/passwd"} {
		if !exists(root, p) {
			t.Errorf("%s purged", p)
		}
	}
	wantStatus(t, apply(t, &System{Root: root, Owns: owns}, specs...), www.ID(), outcome.OK)

	// Something put back between the purge and the read-back fails the
	// line: the read-back alone decides.
	s := &System{Root: root, Owns: owns}
	s.beforeReadBack = func() { write(t, root, "/srv/www/again.html", "x") }
	if r := wantStatus(t, apply(t, s, specs...), www.ID(), outcome.Failed); r.Detail != "read back: holds 1 path neither declared nor owned: /srv/www/again.html (purge = true)" {
		t.Errorf("read-back detail %q", r.Detail)
	}
}

// Without purge, what the declaration does not name is left alone.
func TestNoPurgeLeavesOthers(t *testing.T) {
	root := newRoot(t)
	write(t, root, "/srv/www/stray.html", "x")
	res := apply(t, &System{Root: root}, Spec{Kind: Directory, Path: "/srv/www"}, file("/srv/www/index.html", "hi"))
	wantStatus(t, res, "directory:/srv/www", outcome.OK)
	if !exists(root, "/srv/www/stray.html") {
		t.Error("a directory without purge lost a file")
	}
}

// A declared path reached through a declared symlink is kept where it
// really is, and what a symlink below the purge directory points to is
// never touched.
func TestPurgeKeepsWhatDeclaredSymlinksReach(t *testing.T) {
	root := newRoot(t)
	write(t, root, "/srv/www/releases/1/index.html", "old")
	write(t, root, "/srv/www/releases/1/stray", "x")
	write(t, root, "/srv/outside/keep", "x")
	if err := os.Symlink("../outside", filepath.Join(root, "srv/www/out")); err != nil {
		t.Fatal(err)
	}
	specs := []Spec{
		{Kind: Directory, Path: "/srv/www", Purge: true},
		{Kind: Symlink, Path: "/srv/www/current", Target: "releases/1"},
		file("/srv/www/current/index.html", "new"),
	}
	res := apply(t, &System{Root: root}, specs...)
	if r := wantStatus(t, res, "directory:/srv/www", outcome.Changed); r.Detail != "purged 2 paths neither declared nor owned: /srv/www/out, /srv/www/releases/1/stray" {
		t.Errorf("detail %q", r.Detail)
	}
	if read(t, root, "/srv/www/releases/1/index.html") != "new" {
		t.Error("the declared file behind the symlink was purged or not written")
	}
	if !exists(root, "/srv/outside/keep") {
		t.Error("purge followed a symlink out of its directory")
	}
}

func TestPurgeChecks(t *testing.T) {
	for _, c := range []struct {
		spec Spec
		want string
	}{
		{Spec{Kind: File, Path: "/a", Purge: true}, "purge: does not apply to a file"},
		{Spec{Kind: Directory, Path: "/a", Purge: true, State: "absent"}, "purge: does not apply to a directory declared absent"},
	} {
		bad := Check(&c.spec)
		if len(bad) == 0 || !strings.Contains(bad[0].Error(), c.want) {
			t.Errorf("Check(%+v) = %v, want %q", c.spec, bad, c.want)
		}
	}
}

// A filesystem mounted below a purge directory is left whole.
func TestPurgeStaysOnItsFilesystem(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	root := newRoot(t)
	mnt := filepath.Join(root, "srv/www/data")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
	write(t, root, "/srv/www/data/upload.jpg", "x")
	write(t, root, "/srv/www/stray", "x")
	res := apply(t, &System{Root: root}, Spec{Kind: Directory, Path: "/srv/www", Purge: true})
	if r := wantStatus(t, res, "directory:/srv/www", outcome.Changed); r.Detail != "purged 1 path neither declared nor owned: /srv/www/stray" {
		t.Errorf("detail %q", r.Detail)
	}
	if !exists(root, "/srv/www/data/upload.jpg") {
		t.Error("purge removed a file on another filesystem")
	}
}

func TestPurgeNamesTheFirstPaths(t *testing.T) {
	got := purgeWhat("purged", []string{"/a", "/b", "/c", "/d", "/e", "/f", "/g"})
	if want := "purged 7 paths neither declared nor owned: /a, /b, /c, /d, /e and 2 more"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}
