package resource

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/outcome"
)

func TestApplyCreates(t *testing.T) {
	root := newRoot(t)
	s := &System{Root: root}
	specs := []Spec{
		{Kind: File, Path: "/etc/app/conf.d/app.conf", Content: "port = 8080\n", Mode: "0640", Owner: "muster-alice", Group: "muster-web"},
		{Kind: File, Path: "/etc/app/numeric", Content: "x", Owner: "4102", Group: "4202"},
		{Kind: Directory, Path: "/srv/data", Mode: "2750", SpecialBits: true, Owner: "muster-bob", Group: "muster-ops"},
		{Kind: Symlink, Path: "/etc/app/current", Target: "/srv/data"},
		{Kind: File, Path: "/etc/app/empty"},
	}
	res := apply(t, s, specs...)
	for _, sp := range specs {
		r := wantStatus(t, res, sp.ID(), outcome.Changed)
		if !r.Created {
			t.Errorf("%s: Created = false for a resource this run created", sp.ID())
		}
		want := "created"
		if sp.SpecialBits {
			want = "created, setgid mode 2750"
		}
		if r.Detail != want {
			t.Errorf("%s: detail %q, want %q", sp.ID(), r.Detail, want)
		}
	}
	if got := read(t, root, "/etc/app/conf.d/app.conf"); got != "port = 8080\n" {
		t.Errorf("content %q", got)
	}
	fi, st := lstat(t, root, "/etc/app/conf.d/app.conf")
	if fi.Mode().Perm() != 0o640 || st.Uid != aliceUID || st.Gid != webGID {
		t.Errorf("app.conf: %v %d:%d, want 0640 %d:%d", fi.Mode(), st.Uid, st.Gid, aliceUID, webGID)
	}
	if _, st := lstat(t, root, "/etc/app/numeric"); st.Uid != bobUID || st.Gid != opsGID {
		t.Errorf("numeric ids: %d:%d", st.Uid, st.Gid)
	}
	fi, st = lstat(t, root, "/srv/data")
	if !fi.IsDir() || st.Mode&0o7777 != 0o2750 || st.Uid != bobUID || st.Gid != opsGID {
		t.Errorf("/srv/data: %v %o %d:%d", fi.Mode(), st.Mode&0o7777, st.Uid, st.Gid)
	}
	if target, err := os.Readlink(filepath.Join(root, "/etc/app/current")); err != nil || target != "/srv/data" {
		t.Errorf("symlink: %q %v", target, err)
	}
	if fi, _ := lstat(t, root, "/etc/app/empty"); fi.Size() != 0 || fi.Mode().Perm() != 0o644 {
		t.Errorf("empty file: size %d mode %v, want 0 and the default 0644", fi.Size(), fi.Mode())
	}
	// Missing parents are created 0755 and are not resources.
	if fi, _ := lstat(t, root, "/etc/app/conf.d"); !fi.IsDir() || fi.Mode().Perm() != 0o755 {
		t.Errorf("parent directory: %v", fi.Mode())
	}
	noTemps(t, root)
}

// A second apply of the same specs changes nothing: every line is ok and no
// file is rewritten (same inode, same mtime).
func TestApplyNoOpRewritesNothing(t *testing.T) {
	root := newRoot(t)
	s := &System{Root: root}
	specs := []Spec{
		{Kind: File, Path: "/etc/motd", Content: "hello\n", Mode: "0644", Owner: "muster-alice"},
		{Kind: Directory, Path: "/var/lib/app", Mode: "0700"},
		{Kind: Symlink, Path: "/etc/motd.link", Target: "motd"},
		{Kind: File, Path: "/etc/gone", State: "absent"},
	}
	first := apply(t, s, specs...)
	past := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	for _, p := range []string{"/etc/motd", "/var/lib/app"} {
		if err := os.Chtimes(filepath.Join(root, p), past, past); err != nil {
			t.Fatal(err)
		}
	}
	before := snapshot(t, root)
	second := apply(t, s, specs...)
	for _, sp := range specs {
		r := wantStatus(t, second, sp.ID(), outcome.OK)
		if r.Detail != "" || r.Created {
			t.Errorf("%s: no-op line has detail %q created %v", sp.ID(), r.Detail, r.Created)
		}
		if first[sp.ID()].Status != outcome.Failed && r.Digest != first[sp.ID()].Digest && sp.State != "absent" {
			t.Errorf("%s: digest changed without a change: %s → %s", sp.ID(), first[sp.ID()].Digest, r.Digest)
		}
	}
	if after := snapshot(t, root); after != before {
		t.Errorf("no-op apply changed the tree:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

func TestApplyRepairsDrift(t *testing.T) {
	spec := Spec{Kind: File, Path: "/etc/app.conf", Content: "declared\n", Mode: "0640", Owner: "muster-alice", Group: "muster-web"}
	tests := []struct {
		name    string
		drift   func(t *testing.T, p string)
		detail  string
		rewrite bool // content must be rewritten (new inode)
	}{
		{"content", func(t *testing.T, p string) {
			if err := os.WriteFile(p, []byte("edited by hand\n"), 0o640); err != nil {
				t.Fatal(err)
			}
		}, "content sha256:", true},
		{"mode", func(t *testing.T, p string) {
			if err := os.Chmod(p, 0o666); err != nil {
				t.Fatal(err)
			}
		}, "mode 0666 → 0640", false},
		{"owner", func(t *testing.T, p string) {
			if err := os.Chown(p, 0, -1); err != nil {
				t.Fatal(err)
			}
		}, "owner 0 → 4101", false},
		{"group", func(t *testing.T, p string) {
			if err := os.Chown(p, -1, 0); err != nil {
				t.Fatal(err)
			}
		}, "group 0 → 4201", false},
		{"replaced by a symlink", func(t *testing.T, p string) {
			os.Remove(p)
			if err := os.Symlink("/etc/passwd", p); err != nil {
				t.Fatal(err)
			}
		}, "replaced symlink with file", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := newRoot(t)
			s := &System{Root: root}
			spec := spec
			// A symlink muster does not own is replaced only when the
			// spec says so (TestApplyLeavesForeignSymlink).
			spec.ReplaceSymlink = true
			apply(t, s, spec)
			p := filepath.Join(root, spec.Path)
			tc.drift(t, p)
			_, st := lstat(t, root, spec.Path)
			ino := st.Ino
			res := apply(t, s, spec)
			r := wantStatus(t, res, spec.ID(), outcome.Changed)
			if !strings.Contains(r.Detail, tc.detail) {
				t.Errorf("detail %q does not say %q", r.Detail, tc.detail)
			}
			if r.Created {
				t.Error("a repaired file is reported as created")
			}
			fi, st := lstat(t, root, spec.Path)
			if got := read(t, root, spec.Path); got != spec.Content || fi.Mode().Perm() != 0o640 || st.Uid != aliceUID || st.Gid != webGID {
				t.Errorf("after repair: %q %v %d:%d", got, fi.Mode(), st.Uid, st.Gid)
			}
			if rewritten := st.Ino != ino; rewritten != tc.rewrite {
				t.Errorf("content rewritten = %v, want %v", rewritten, tc.rewrite)
			}
			noTemps(t, root)
		})
	}
}

// A chown clears set-id bits; fixing only the owner must keep them.
func TestApplyOwnerFixKeepsSetIDBits(t *testing.T) {
	root := newRoot(t)
	s := &System{Root: root}
	spec := Spec{Kind: File, Path: "/usr/bin/tool", Content: "#!/bin/sh\n", Mode: "4755", SpecialBits: true, Owner: "muster-alice"}
	apply(t, s, spec)
	if err := os.Lchown(filepath.Join(root, spec.Path), 0, -1); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(root, spec.Path), 0o4755)
	wantStatus(t, apply(t, s, spec), spec.ID(), outcome.Changed)
	if _, st := lstat(t, root, spec.Path); st.Mode&0o7777 != 0o4755 || st.Uid != aliceUID {
		t.Errorf("mode %o uid %d, want 4755 %d", st.Mode&0o7777, st.Uid, aliceUID)
	}
}

func TestApplyDirectoryAndSymlinkDrift(t *testing.T) {
	root := newRoot(t)
	s := &System{Root: root}
	dir := Spec{Kind: Directory, Path: "/srv/www", Mode: "0750", Group: "muster-web"}
	link := Spec{Kind: Symlink, Path: "/srv/current", Target: "www"}
	apply(t, s, dir, link)
	os.Chmod(filepath.Join(root, dir.Path), 0o777)
	os.Remove(filepath.Join(root, link.Path))
	os.Symlink("elsewhere", filepath.Join(root, link.Path))

	res := apply(t, s, dir, link)
	if r := wantStatus(t, res, link.ID(), outcome.Changed); r.Detail != `target "elsewhere" → "www"` {
		t.Errorf("symlink detail %q", r.Detail)
	}
	if r := wantStatus(t, res, dir.ID(), outcome.Changed); r.Detail != "mode 0777 → 0750" {
		t.Errorf("directory detail %q", r.Detail)
	}
	if target, _ := os.Readlink(filepath.Join(root, link.Path)); target != "www" {
		t.Errorf("symlink points to %q", target)
	}
	if fi, _ := lstat(t, root, dir.Path); fi.Mode().Perm() != 0o750 {
		t.Errorf("directory mode %v", fi.Mode())
	}
	noTemps(t, root)
}

func TestApplyAbsent(t *testing.T) {
	root := newRoot(t)
	write(t, root, "/etc/old.conf", "x")
	write(t, root, "/srv/full/keep", "data")
	os.MkdirAll(filepath.Join(root, "/srv/empty"), 0o755)
	os.Symlink("old.conf", filepath.Join(root, "/etc/old.link"))
	specs := []Spec{
		{Kind: File, Path: "/etc/old.conf", State: "absent"},
		{Kind: File, Path: "/etc/never", State: "absent"},
		{Kind: File, Path: "/no/such/parent", State: "absent"},
		{Kind: Directory, Path: "/srv/empty", State: "absent"},
		{Kind: Directory, Path: "/srv/full", State: "absent"},
		{Kind: Symlink, Path: "/etc/old.link", State: "absent"},
		{Kind: Symlink, Path: "/etc/passwd", State: "absent"},
	}
	res := apply(t, &System{Root: root}, specs...)
	wantStatus(t, res, "file:/etc/old.conf", outcome.Removed)
	wantStatus(t, res, "file:/etc/never", outcome.OK)
	wantStatus(t, res, "file:/no/such/parent", outcome.OK)
	wantStatus(t, res, "directory:/srv/empty", outcome.Removed)
	wantStatus(t, res, "symlink:/etc/old.link", outcome.Removed)
	if r := wantStatus(t, res, "directory:/srv/full", outcome.Failed); !strings.Contains(r.Detail, "/srv/full is not empty") {
		t.Errorf("non-empty directory detail %q", r.Detail)
	}
	if r := wantStatus(t, res, "symlink:/etc/passwd", outcome.Failed); !strings.Contains(r.Detail, "is a file, not a symlink") {
		t.Errorf("wrong-kind detail %q", r.Detail)
	}
	for _, p := range []string{"/etc/old.conf", "/srv/empty", "/etc/old.link"} {
		if exists(root, p) {
			t.Errorf("%s still exists", p)
		}
	}
	if read(t, root, "/srv/full/keep") != "data" || read(t, root, "/etc/passwd") == "" {
		t.Error("muster removed something it must not")
	}
}

// A file or symlink never replaces a directory that is in its way.
func TestApplyRefusesToReplaceDirectory(t *testing.T) {
	root := newRoot(t)
	write(t, root, "/etc/app/inside", "data")
	res := apply(t, &System{Root: root},
		file("/etc/app", "x"),
		Spec{Kind: Symlink, Path: "/etc", Target: "/tmp"},
	)
	for _, id := range []string{"file:/etc/app", "symlink:/etc"} {
		if r := wantStatus(t, res, id, outcome.Failed); !strings.Contains(r.Detail, "is a directory") {
			t.Errorf("%s: detail %q", id, r.Detail)
		}
	}
	if read(t, root, "/etc/app/inside") != "data" {
		t.Error("directory contents changed")
	}
}

// A symlink planted in a parent path, pointing outside the root, is never
// followed: the line fails naming it, and nothing is written outside.
func TestApplyRefusesUndeclaredParentSymlink(t *testing.T) {
	for _, target := range []string{"ABS", "../../../../../../../../OUT"} {
		t.Run(target, func(t *testing.T) {
			root := newRoot(t)
			outside := t.TempDir()
			write(t, outside, "/conf", "outside, must stay")
			tgt := strings.Replace(strings.Replace(target, "ABS", outside, 1), "OUT", strings.TrimPrefix(outside, "/"), 1)
			if err := os.Symlink(tgt, filepath.Join(root, "etc", "app")); err != nil {
				t.Fatal(err)
			}
			before := snapshot(t, outside)
			specs := []Spec{
				file("/etc/app/conf", "planted"),
				file("/etc/app/new/deeper", "planted"),
				{Kind: Directory, Path: "/etc/app/d"},
				{Kind: File, Path: "/etc/app/conf", State: "absent"},
			}
			for _, sp := range specs {
				res := apply(t, &System{Root: root}, sp)
				r := wantStatus(t, res, sp.ID(), outcome.Failed)
				if !strings.Contains(r.Detail, "parent /etc/app is a symlink") || !strings.Contains(r.Detail, "no declaration names") {
					t.Errorf("%s: detail %q does not name the symlink", sp.ID(), r.Detail)
				}
			}
			if after := snapshot(t, outside); after != before {
				t.Errorf("something was written outside the root:\n%s", after)
			}
		})
	}
}

// A ".." in a declared path, or a declared symlink whose target climbs out
// of the root, is refused and nothing is written outside.
func TestApplyRefusesDotDotEscape(t *testing.T) {
	parent := t.TempDir()
	root := filepath.Join(parent, "root")
	os.MkdirAll(filepath.Join(root, "etc"), 0o755)
	s := &System{Root: root}
	for _, p := range []string{"/../escaped", "/etc/../../escaped", "etc/relative", "/etc/app/", "/etc//x", "/"} {
		sp := file(p, "x")
		if r := wantStatus(t, apply(t, s, sp), sp.ID(), outcome.Failed); !strings.Contains(r.Detail, "path") {
			t.Errorf("%q: detail %q", p, r.Detail)
		}
	}
	// Declared, so it may be followed, but it climbs above the root.
	link := Spec{Kind: Symlink, Path: "/etc/up", Target: "../../escaped-dir"}
	f := file("/etc/up/x", "x")
	res := apply(t, s, link, f)
	wantStatus(t, res, link.ID(), outcome.Changed)
	if r := wantStatus(t, res, f.ID(), outcome.Failed); !strings.Contains(r.Detail, "leaves the root") {
		t.Errorf("climbing symlink: detail %q", r.Detail)
	}
	if ents, _ := os.ReadDir(parent); len(ents) != 1 || ents[0].Name() != "root" {
		t.Errorf("something was written beside the root: %v", ents)
	}
}

// A symlink the same declaration names may be a parent: it is fixed first,
// then the file is written through it, inside the root.
func TestApplyFollowsDeclaredParentSymlink(t *testing.T) {
	root := newRoot(t)
	os.MkdirAll(filepath.Join(root, "opt/app-1"), 0o755)
	os.MkdirAll(filepath.Join(root, "opt/app-2"), 0o755)
	os.Symlink("app-1", filepath.Join(root, "opt/app"))
	specs := []Spec{
		// Listed before the symlink on purpose: depth decides.
		file("/opt/app/etc/conf", "v2"),
		{Kind: Symlink, Path: "/opt/app", Target: "/opt/app-2"},
	}
	res := apply(t, &System{Root: root}, specs...)
	wantStatus(t, res, specs[0].ID(), outcome.Changed)
	wantStatus(t, res, specs[1].ID(), outcome.Changed)
	if got := read(t, root, "/opt/app-2/etc/conf"); got != "v2" {
		t.Errorf("content behind the new link: %q", got)
	}
	if exists(root, "/opt/app-1/etc") {
		t.Error("wrote through the old link target")
	}
	res = apply(t, &System{Root: root}, specs...)
	wantStatus(t, res, specs[0].ID(), outcome.OK)
	wantStatus(t, res, specs[1].ID(), outcome.OK)

	dry := &System{Root: root, DryRun: true}
	os.Remove(filepath.Join(root, "opt/app"))
	os.Symlink("app-1", filepath.Join(root, "opt/app"))
	res = apply(t, dry, specs...)
	if r := wantStatus(t, res, specs[0].ID(), outcome.Changed); !strings.Contains(r.Detail, "once symlink /opt/app points to") {
		t.Errorf("dry run behind a wrong declared link: %q", r.Detail)
	}
}

func TestApplyDryRunTouchesNothing(t *testing.T) {
	root := newRoot(t)
	s := &System{Root: root}
	base := []Spec{
		{Kind: File, Path: "/etc/a", Content: "a", Mode: "0600"},
		{Kind: Directory, Path: "/srv/d"},
		{Kind: Symlink, Path: "/etc/l", Target: "a"},
		{Kind: File, Path: "/etc/unchanged", Content: "same"},
	}
	apply(t, s, base...)
	write(t, root, "/etc/old", "to be removed")
	want := []Spec{
		{Kind: File, Path: "/etc/a", Content: "b", Mode: "0644", Owner: "muster-alice"},
		{Kind: File, Path: "/new/dir/file", Content: "n"},
		{Kind: Directory, Path: "/srv/d", Mode: "0700"},
		{Kind: Symlink, Path: "/etc/l", Target: "b"},
		{Kind: File, Path: "/etc/old", State: "absent"},
		{Kind: File, Path: "/etc/unchanged", Content: "same"},
		{Kind: Directory, Path: "/etc", State: "absent"},
	}
	before := snapshot(t, root)
	res := apply(t, &System{Root: root, DryRun: true}, want...)
	if after := snapshot(t, root); after != before {
		t.Fatalf("dry run changed the tree:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	for id, w := range map[string]string{
		"file:/etc/a":        "would change content sha256:",
		"file:/new/dir/file": "would create",
		"directory:/srv/d":   "would change mode 0755 → 0700",
		"symlink:/etc/l":     `would change target "a" → "b"`,
	} {
		if r := wantStatus(t, res, id, outcome.Changed); !strings.HasPrefix(r.Detail, w) {
			t.Errorf("%s: detail %q, want prefix %q", id, r.Detail, w)
		}
	}
	if r := res["file:/etc/a"]; !strings.Contains(r.Detail, "owner 0 → 4101") || !strings.Contains(r.Detail, "mode 0600 → 0644") {
		t.Errorf("file:/etc/a detail %q lacks mode or owner", r.Detail)
	}
	wantStatus(t, res, "file:/etc/old", outcome.Removed)
	wantStatus(t, res, "file:/etc/unchanged", outcome.OK)
	if r := wantStatus(t, res, "directory:/etc", outcome.Failed); !strings.Contains(r.Detail, "not empty") {
		t.Errorf("dry run of a non-empty absent directory: %q", r.Detail)
	}
}

// Only the read-back decides a line. The hook undoes each change after the
// change step reported success, and each line must then fail saying what
// differs; a line that needed no change is read back too.
func TestReadBackDecides(t *testing.T) {
	tests := []struct {
		name   string
		spec   Spec
		undo   func(root string) error
		detail string
	}{
		{"content", file("/etc/app.conf", "declared"), func(root string) error {
			return os.WriteFile(filepath.Join(root, "etc/app.conf"), []byte("undone"), 0o644)
		}, "content digest sha256:"},
		{"mode", Spec{Kind: File, Path: "/etc/app.conf", Content: "x", Mode: "0600"}, func(root string) error {
			return os.Chmod(filepath.Join(root, "etc/app.conf"), 0o644)
		}, "mode 0644 ≠ declared 0600"},
		{"owner", Spec{Kind: File, Path: "/etc/app.conf", Content: "x", Owner: "muster-alice"}, func(root string) error {
			return os.Chown(filepath.Join(root, "etc/app.conf"), 0, -1)
		}, "owner 0 ≠ declared muster-alice (4101)"},
		{"removed again", Spec{Kind: Directory, Path: "/srv/d"}, func(root string) error {
			return os.Remove(filepath.Join(root, "srv/d"))
		}, "/srv/d does not exist"},
		{"recreated", Spec{Kind: File, Path: "/etc/passwd", State: "absent"}, func(root string) error {
			return os.WriteFile(filepath.Join(root, "etc/passwd"), nil, 0o644)
		}, "/etc/passwd exists (file), declared absent"},
		{"symlink", Spec{Kind: Symlink, Path: "/etc/l", Target: "a"}, func(root string) error {
			os.Remove(filepath.Join(root, "etc/l"))
			return os.Symlink("b", filepath.Join(root, "etc/l"))
		}, `target "b" ≠ declared "a"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, noop := range []bool{false, true} {
				root := newRoot(t)
				s := &System{Root: root}
				if noop {
					apply(t, s, tc.spec) // the next run needs no change
				}
				s.beforeReadBack = func() {
					if err := tc.undo(root); err != nil {
						t.Fatal(err)
					}
				}
				r := wantStatus(t, apply(t, s, tc.spec), tc.spec.ID(), outcome.Failed)
				if !strings.HasPrefix(r.Detail, "read back: ") || !strings.Contains(r.Detail, tc.detail) {
					t.Errorf("noop=%v: detail %q, want read back saying %q", noop, r.Detail, tc.detail)
				}
				if r.Created {
					t.Error("a failed line is reported as created")
				}
			}
		})
	}
}

// Secret content never appears in a line: not when created, repaired,
// failed by read-back, refused, or in a dry run. Only digests do.
func TestSecretNeverInDetail(t *testing.T) {
	const secret = "s3cr3t-token-QX7V\n"
	root := newRoot(t)
	spec := Spec{Kind: File, Path: "/etc/app/token", Content: secret, Secret: true, Mode: "0600"}
	var details []string
	collect := func(res map[string]Result) {
		for _, r := range res {
			details = append(details, r.Detail)
		}
	}
	s := &System{Root: root}
	collect(apply(t, s, spec))
	write(t, root, "/etc/app/token", "s3cr3t-token-QX7W\n")
	collect(apply(t, &System{Root: root, DryRun: true}, spec))
	collect(apply(t, s, spec))
	s.beforeReadBack = func() { write(t, root, "/etc/app/token", secret[:8]) }
	collect(apply(t, s, spec))
	s.beforeReadBack = nil
	os.Remove(filepath.Join(root, "etc/app/token"))
	os.MkdirAll(filepath.Join(root, "etc/app/token/in-the-way"), 0o755)
	collect(apply(t, s, spec))

	sawDigest := false
	for _, d := range details {
		for _, frag := range []string{"s3cr3t", "QX7", "token-"} {
			if strings.Contains(d, frag) {
				t.Errorf("detail %q contains secret content", d)
			}
		}
		sawDigest = sawDigest || strings.Contains(d, "sha256:")
	}
	if !sawDigest {
		t.Errorf("no detail named a digest: %q", details)
	}
}

func TestApplyRefusesBadSpecs(t *testing.T) {
	root := newRoot(t)
	tests := []struct {
		spec   Spec
		detail string
	}{
		{Spec{Kind: File, Path: "/a", Owner: "nobody-here"}, `owner "nobody-here" not found in ` + root + "/etc/passwd"},
		{Spec{Kind: File, Path: "/a", Group: "nogroup-here"}, `group "nogroup-here" not found`},
		{Spec{Kind: File, Path: "/a", Mode: "rw-r--r--"}, `mode: "rw-r--r--" is not a mode`},
		{Spec{Kind: File, Path: "/a", Mode: "17777"}, `mode: "17777" is not a mode`},
		{Spec{Kind: File, Path: "/a", Mode: "4755"}, `mode: "4755" sets the setuid bit; add special_bits = true`},
		{Spec{Kind: File, Path: "/a", State: "gone"}, `state: must be "present" or "absent", not "gone"`},
		{Spec{Kind: File, Path: "/a/../b"}, `path "/a/../b" contains ..`},
		{Spec{Kind: File, Path: "/a\nb"}, `path "/a\nb" contains a control character`},
		{Spec{Kind: Symlink, Path: "/a"}, "target: a symlink needs a target"},
		{Spec{Kind: Symlink, Path: "/a", Target: "b", Mode: "0644"}, "mode: does not apply to a symlink"},
		{Spec{Kind: "cron", Path: "/a"}, `unknown resource type "cron"`},
		{Spec{Kind: Package, Name: "-oops"}, `"-oops" is not a package name`},
	}
	for _, tc := range tests {
		res := apply(t, &System{Root: root}, tc.spec)
		if r := wantStatus(t, res, tc.spec.ID(), outcome.Failed); !strings.Contains(r.Detail, tc.detail) {
			t.Errorf("%+v: detail %q, want %q", tc.spec, r.Detail, tc.detail)
		}
	}
	if exists(root, "/a") {
		t.Error("an invalid spec was applied")
	}
	res := (&System{}).Apply(context.Background(), []Spec{file("/a", "x")})
	if res[0].Status != outcome.Failed || !strings.Contains(res[0].Detail, "no root") {
		t.Errorf("empty Root: %+v", res[0])
	}
}

func TestApplyRefusesDuplicatePaths(t *testing.T) {
	root := newRoot(t)
	res := apply(t, &System{Root: root}, file("/etc/x", "a"), Spec{Kind: Directory, Path: "/etc/x"}, file("/etc/y", "y"))
	for _, id := range []string{"file:/etc/x", "directory:/etc/x"} {
		if r := wantStatus(t, res, id, outcome.Failed); !strings.Contains(r.Detail, `path "/etc/x" is declared as a file and as a directory`) {
			t.Errorf("%s: %q", id, r.Detail)
		}
	}
	wantStatus(t, res, "file:/etc/y", outcome.Changed)
	if exists(root, "/etc/x") {
		t.Error("a duplicated path was applied")
	}
}

// Digest is the documented canonical state digest, so others can recompute
// it.
func TestResultDigestIsCanonical(t *testing.T) {
	root := newRoot(t)
	res := apply(t, &System{Root: root}, Spec{Kind: File, Path: "/etc/d", Content: "abc", Mode: "0600", Owner: "4101", Group: "4201"})
	want := sha("type file\npath /etc/d\ncontent " + sha("abc") + "\nmode 0600\nuid 4101\ngid 4201\n")
	if got := res["file:/etc/d"].Digest; got != want {
		t.Errorf("digest %s, want %s", got, want)
	}
}

func TestRemoveOrphans(t *testing.T) {
	root := newRoot(t)
	write(t, root, "/srv/app/conf", "x")
	write(t, root, "/srv/kept/data", "user data")
	os.Symlink("conf", filepath.Join(root, "srv/app/link"))
	os.MkdirAll(filepath.Join(root, "srv/was-file"), 0o755)
	specs := []Spec{
		{Kind: Directory, Path: "/srv/app"}, // emptied by this same call
		file("/srv/app/conf", ""),
		{Kind: Symlink, Path: "/srv/app/link"},
		{Kind: Directory, Path: "/srv/kept"},
		file("/srv/never-there", ""),
		file("/srv/was-file", ""),
		{Kind: Service, Name: "app.service"},
		{Kind: Package, Name: "app"},
	}
	res := (&System{Root: root}).RemoveAll(context.Background(), specs)
	m := map[string]Result{}
	for _, r := range res {
		m[r.ID] = r
	}
	wantStatus(t, m, "directory:/srv/app", outcome.Removed)
	wantStatus(t, m, "file:/srv/app/conf", outcome.Removed)
	wantStatus(t, m, "symlink:/srv/app/link", outcome.Removed)
	if r := wantStatus(t, m, "directory:/srv/kept", outcome.Warn); r.Detail != "directory /srv/kept is not empty; left in place until it is" {
		t.Errorf("non-empty orphan: %q", r.Detail)
	}
	if r := wantStatus(t, m, "file:/srv/never-there", outcome.OK); r.Detail != "already absent" {
		t.Errorf("absent orphan: %q", r.Detail)
	}
	if r := m["file:/srv/was-file"]; r.Status != outcome.Failed || !strings.Contains(r.Detail, "is now a directory") {
		t.Errorf("orphan of another kind: %+v", r)
	}
	if r := m["service:app.service"]; r.Status != outcome.OK || !strings.Contains(r.Detail, "does not remove units") {
		t.Errorf("service orphan: %+v", r)
	}
	if r := m["package:app"]; r.Status != outcome.OK || r.Detail != pruneNote {
		t.Errorf("package orphan without prune: %+v", r)
	}
	if exists(root, "/srv/app") || read(t, root, "/srv/kept/data") != "user data" || !exists(root, "/srv/was-file") {
		t.Error("orphans removed wrongly")
	}
	noTemps(t, root)
}

func TestObserve(t *testing.T) {
	root := newRoot(t)
	s := &System{Root: root}
	apply(t, s, Spec{Kind: File, Path: "/etc/o", Content: "hello", Mode: "0640", Owner: "muster-bob"})
	st, err := s.Observe(context.Background(), file("/etc/o", ""))
	if err != nil {
		t.Fatal(err)
	}
	if !st.Exists || st.Type != File || st.Mode != 0o640 || st.UID != bobUID || st.Size != 5 || st.Digest != sha("hello") {
		t.Errorf("observed %+v", st)
	}
	st, err = s.Observe(context.Background(), file("/etc/none", ""))
	if err != nil || st.Exists {
		t.Errorf("missing file: %+v %v", st, err)
	}
}

// A file with another hard link (here to a file outside the root) gets a
// new inode when its mode or owner is fixed: the file behind the other link
// keeps its own.
func TestApplyDoesNotChmodThroughHardLink(t *testing.T) {
	root := newRoot(t)
	outside := filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(outside, []byte("declared"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(outside, filepath.Join(root, "etc/linked")); err != nil {
		t.Fatal(err)
	}
	spec := Spec{Kind: File, Path: "/etc/linked", Content: "declared", Mode: "0644", Owner: "muster-alice"}
	wantStatus(t, apply(t, &System{Root: root}, spec), spec.ID(), outcome.Changed)
	fi, err := os.Lstat(outside)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); fi.Mode().Perm() != 0o600 || st.Uid != 0 {
		t.Errorf("the file behind the hard link changed: %v uid %d", fi.Mode(), st.Uid)
	}
	if fi, st := lstat(t, root, spec.Path); fi.Mode().Perm() != 0o644 || st.Uid != aliceUID || st.Nlink != 1 {
		t.Errorf("declared file: %v uid %d nlink %d", fi.Mode(), st.Uid, st.Nlink)
	}
}

// With Root "/" names resolve through the system's user database and paths
// are the real ones.
func TestApplyLiveRoot(t *testing.T) {
	dir := t.TempDir()
	if real, err := filepath.EvalSymlinks(dir); err != nil || real != dir {
		t.Skipf("the temp directory %s is reached through a symlink", dir)
	}
	spec := Spec{Kind: File, Path: dir + "/live.conf", Content: "x", Owner: "root", Group: "root", Mode: "0600"}
	s := &System{Root: "/"}
	wantStatus(t, apply(t, s, spec), spec.ID(), outcome.Changed)
	wantStatus(t, apply(t, s, spec), spec.ID(), outcome.OK)
	if got := read(t, "/", spec.Path); got != "x" {
		t.Errorf("content %q", got)
	}
}

// Enough lines that observations and lines are made in parallel: each line
// still gets its own resource's state and digest.
func TestApplyManyLinesInParallel(t *testing.T) {
	root := newRoot(t)
	s := &System{Root: root, Now: later}
	var specs []Spec
	for i := range 700 {
		specs = append(specs, file(fmt.Sprintf("/srv/d%d/f%03d", i%7, i), fmt.Sprintf("content %d\n", i)))
	}
	specs = append(specs, Spec{Kind: Directory, Path: "/srv/d0", Mode: "0750"})
	first := apply(t, s, specs...)
	s.Known = s.Fingerprints()
	if len(s.Known) != 700 {
		t.Fatalf("%d fingerprints, want 700", len(s.Known))
	}
	write(t, root, "/srv/d3/f003", "drifted\n")
	res := apply(t, s, specs...)
	for i, sp := range specs {
		want := outcome.OK
		if i == 3 {
			want = outcome.Changed
		}
		r := wantStatus(t, res, sp.ID(), want)
		if r.Digest != first[sp.ID()].Digest {
			t.Errorf("%s: digest %s, first run %s", sp.ID(), r.Digest, first[sp.ID()].Digest)
		}
		if sp.Kind == File {
			if got := read(t, root, sp.Path); got != sp.Content {
				t.Errorf("%s holds %q", sp.Path, got)
			}
		}
	}
}

// A System checks the specs it is given (Check, Clashes) and fails the
// lines that break the rules, unless Checked says its caller held them
// to Validate already, as apply does with every declaration: then it
// does not look again.
func TestApplyChecksUnlessChecked(t *testing.T) {
	specs := []Spec{file("/etc/good", "g\n"), file("/etc//bad", "b\n"), file("/etc/both", "f\n"), {Kind: Directory, Path: "/etc/both"}}
	res := apply(t, &System{Root: newRoot(t)}, specs...)
	wantStatus(t, res, "file:/etc/good", outcome.Changed)
	if r := wantStatus(t, res, "file:/etc//bad", outcome.Failed); !strings.Contains(r.Detail, "is not clean") {
		t.Errorf("the unclean path failed with %q", r.Detail)
	}
	for _, id := range []string{"file:/etc/both", "directory:/etc/both"} {
		if r := wantStatus(t, res, id, outcome.Failed); !strings.Contains(r.Detail, "a path has one type") {
			t.Errorf("%s failed with %q", id, r.Detail)
		}
	}

	root := newRoot(t)
	res = apply(t, &System{Root: root, Checked: true}, specs[0], specs[2])
	wantStatus(t, res, "file:/etc/good", outcome.Changed)
	wantStatus(t, res, "file:/etc/both", outcome.Changed)
	if got := read(t, root, "/etc/both"); got != "f\n" {
		t.Errorf("/etc/both holds %q", got)
	}
}
