package resource

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/muster-tool/muster/internal/outcome"
)

// The account tests drive the real shadow tools (useradd, usermod, userdel,
// groupadd, groupmod, groupdel) on a scratch root given with --root, which
// makes them chroot there: they need root.
func needShadow(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("useradd --root chroots, which needs root")
	}
	for _, tool := range []string{"useradd", "usermod", "userdel", "groupadd", "groupmod", "groupdel"} {
		if p := findTool(tool); p == tool {
			if _, err := exec.LookPath(tool); err != nil {
				t.Skipf("%s not installed (Debian package passwd)", tool)
			}
		}
	}
	return newRoot(t)
}

func intp(n int) *int { return &n }

// passwdLine and groupLine return the root's etc/passwd or etc/group line
// of a name, or "".
func passwdLine(t *testing.T, root, name string) string { return dbLine(t, root, "passwd", name) }
func groupLine(t *testing.T, root, name string) string  { return dbLine(t, root, "group", name) }

func dbLine(t *testing.T, root, db, name string) string {
	t.Helper()
	for l := range strings.SplitSeq(read(t, root, "/etc/"+db), "\n") {
		if strings.HasPrefix(l, name+":") {
			return l
		}
	}
	return ""
}

// A group, a user in it and a file they own, in one run: the group is made
// before the user and both before the file, which gets their ids, never
// root's. A second run changes nothing.
func TestAccountsCreatedBeforeTheirFiles(t *testing.T) {
	root := needShadow(t)
	s := &System{Root: root}
	web := Spec{Kind: Group, Name: "web", GID: intp(4300)}
	deploy := Spec{Kind: User, Name: "deploy", UID: intp(4400), Group: "web", Groups: []string{"muster-ops", "web"}, Home: "/srv/deploy", Shell: "/bin/sh"}
	f := Spec{Kind: File, Path: "/srv/deploy/.profile", Content: "umask 027\n", Owner: "deploy", Group: "web", Mode: "0640"}

	// Declared in the order that would fail if it were the order of work.
	res := apply(t, s, f, deploy, web)
	for _, id := range []string{"group:web", "user:deploy", "file:/srv/deploy/.profile"} {
		if r := wantStatus(t, res, id, outcome.Changed); !strings.HasPrefix(r.Detail, "created") {
			t.Errorf("%s: detail %q", id, r.Detail)
		}
		if !res[id].Created {
			t.Errorf("%s: not marked created", id)
		}
	}
	if got := passwdLine(t, root, "deploy"); got != "deploy:x:4400:4300::/srv/deploy:/bin/sh" && got != "deploy:!:4400:4300::/srv/deploy:/bin/sh" {
		t.Errorf("passwd line %q", got)
	}
	if got := groupLine(t, root, "web"); got != "web:x:4300:deploy" {
		t.Errorf("group line %q", got)
	}
	if got := groupLine(t, root, "muster-ops"); got != "muster-ops:x:4202:muster-bob,deploy" {
		t.Errorf("muster-ops line %q", got)
	}
	_, st := lstat(t, root, "/srv/deploy/.profile")
	if st.Uid != 4400 || st.Gid != 4300 {
		t.Errorf("file owned by %d:%d, want 4400:4300", st.Uid, st.Gid)
	}
	if fi, _ := lstat(t, root, "/srv/deploy"); !fi.IsDir() {
		t.Error("useradd made no home directory")
	}

	res = apply(t, s, f, deploy, web)
	for _, id := range []string{"group:web", "user:deploy", "file:/srv/deploy/.profile"} {
		wantStatus(t, res, id, outcome.OK)
	}
}

// Changed settings go through usermod and groupmod; state = "absent"
// through userdel and groupdel; each line says what changed.
func TestAccountsChangedAndRemoved(t *testing.T) {
	root := needShadow(t)
	s := &System{Root: root}
	web := Spec{Kind: Group, Name: "web", GID: intp(4300)}
	deploy := Spec{Kind: User, Name: "deploy", UID: intp(4400), Group: "web", Shell: "/bin/sh", Groups: []string{"muster-ops"}}
	f := Spec{Kind: File, Path: "/srv/f", Content: "f", Owner: "deploy", Group: "web"}
	apply(t, s, web, deploy, f)

	web.GID = intp(4301)
	deploy.Group, deploy.Shell, deploy.Groups, deploy.UID = "muster-web", "/bin/bash", []string{"web"}, intp(4401)
	res := apply(t, s, web, deploy, f)
	// The file's owners are looked up after the accounts changed.
	if r := wantStatus(t, res, f.ID(), outcome.Changed); r.Detail != "owner 4400 → 4401, group 4300 → 4301" {
		t.Errorf("file detail %q", r.Detail)
	}
	if r := wantStatus(t, res, "group:web", outcome.Changed); r.Detail != "gid 4300 → 4301" {
		t.Errorf("group detail %q", r.Detail)
	}
	r := wantStatus(t, res, "user:deploy", outcome.Changed)
	if r.Detail != `uid 4400 → 4401, primary group web (4301) → muster-web, groups muster-ops → web, shell "/bin/sh" → "/bin/bash"` {
		t.Errorf("user detail %q", r.Detail)
	}
	if res["user:deploy"].Created {
		t.Error("a changed user is marked created")
	}
	if got := passwdLine(t, root, "deploy"); !strings.Contains(got, ":4401:4201:") || !strings.HasSuffix(got, ":/bin/bash") {
		t.Errorf("passwd line %q", got)
	}

	deploy = Spec{Kind: User, Name: "deploy", State: "absent"}
	web = Spec{Kind: Group, Name: "web", State: "absent"}
	res = apply(t, s, deploy, web)
	wantStatus(t, res, "user:deploy", outcome.Removed)
	wantStatus(t, res, "group:web", outcome.Removed)
	if passwdLine(t, root, "deploy") != "" || groupLine(t, root, "web") != "" {
		t.Errorf("still there:\n%s\n%s", read(t, root, "/etc/passwd"), read(t, root, "/etc/group"))
	}
	res = apply(t, s, deploy, web)
	wantStatus(t, res, "user:deploy", outcome.OK)
	wantStatus(t, res, "group:web", outcome.OK)

	// A user and its primary group go in one run: the user first.
	apply(t, s, Spec{Kind: Group, Name: "app"}, Spec{Kind: User, Name: "app", Group: "app"})
	res = apply(t, s, Spec{Kind: Group, Name: "app", State: "absent"}, Spec{Kind: User, Name: "app", State: "absent"})
	wantStatus(t, res, "group:app", outcome.Removed)
	wantStatus(t, res, "user:app", outcome.Removed)
}

// The read-back is the databases as they are: an edit by hand is found and
// put right by the next run.
func TestAccountsDriftRepaired(t *testing.T) {
	root := needShadow(t)
	s := &System{Root: root}
	deploy := Spec{Kind: User, Name: "deploy", Shell: "/bin/sh"}
	apply(t, s, deploy)
	line := passwdLine(t, root, "deploy")
	write(t, root, "/etc/passwd", strings.Replace(read(t, root, "/etc/passwd"), line, strings.TrimSuffix(line, "/bin/sh")+"/bin/false", 1))
	if !strings.HasSuffix(passwdLine(t, root, "deploy"), ":/bin/false") {
		t.Fatalf("test did not edit the shell: %q", passwdLine(t, root, "deploy"))
	}
	if st, err := s.Observe(context.Background(), deploy); err != nil || st.Shell != "/bin/false" {
		t.Fatalf("Observe: %+v %v", st, err)
	}
	if r := wantStatus(t, apply(t, s, deploy), "user:deploy", outcome.Changed); r.Detail != `shell "/bin/false" → "/bin/sh"` {
		t.Errorf("detail %q", r.Detail)
	}
}

// An owner that is neither on the host nor declared fails its line, and so
// does one the declaration makes too late or fails to make; the file is
// never made with another owner in its place.
func TestOwnerMustExistOrBeDeclared(t *testing.T) {
	root := needShadow(t)
	s := &System{Root: root}

	nobody := Spec{Kind: File, Path: "/srv/a", Content: "a", Owner: "ghost"}
	r := wantStatus(t, apply(t, s, nobody), nobody.ID(), outcome.Failed)
	if !strings.Contains(r.Detail, `owner "ghost" not found in `+root+"/etc/passwd; no user resource of this declaration makes it") {
		t.Errorf("detail %q", r.Detail)
	}

	late := Spec{Kind: User, Name: "late", Order: 500}
	owned := Spec{Kind: File, Path: "/srv/b", Content: "b", Owner: "late"}
	res := apply(t, s, owned, late)
	if r := wantStatus(t, res, owned.ID(), outcome.Failed); !strings.Contains(r.Detail, `owner "late" does not exist yet: this declaration makes it at order 500, after this file's order 200; give the user a lower order`) {
		t.Errorf("detail %q", r.Detail)
	}
	wantStatus(t, res, late.ID(), outcome.Changed)

	// useradd refuses a primary group that does not exist.
	broken := Spec{Kind: User, Name: "broken", Group: "no-such-group"}
	group := Spec{Kind: Directory, Path: "/srv/c", Group: "muster-web", Owner: "broken"}
	res = apply(t, s, broken, group)
	if r := wantStatus(t, res, broken.ID(), outcome.Failed); !strings.Contains(r.Detail, "useradd exited with status 6") || !strings.Contains(r.Detail, "no-such-group") {
		t.Errorf("useradd detail %q", r.Detail)
	}
	if r := wantStatus(t, res, group.ID(), outcome.Failed); r.Detail != `owner "broken" does not exist on this host, although this declaration makes it: see the line of user:broken` {
		t.Errorf("detail %q", r.Detail)
	}
	for _, p := range []string{"/srv/a", "/srv/c"} {
		if exists(root, p) {
			t.Errorf("%s was made although its owner does not exist", p)
		}
	}
}

// A dry run says what it would make, and that a file would get its owner
// once the owner is made, and touches nothing.
func TestAccountsDryRun(t *testing.T) {
	root := needShadow(t)
	before := snapshot(t, root)
	s := &System{Root: root, DryRun: true}
	deploy := Spec{Kind: User, Name: "deploy"}
	bob := Spec{Kind: User, Name: "muster-bob", Shell: "/bin/bash"}
	gone := Spec{Kind: Group, Name: "muster-web", State: "absent"}
	f := Spec{Kind: File, Path: "/srv/a", Content: "a", Owner: "deploy"}
	res := apply(t, s, deploy, bob, gone, f)
	for id, want := range map[string]string{
		"user:deploy":      "would create",
		"user:muster-bob":  `would change shell "/bin/sh" → "/bin/bash"`,
		"group:muster-web": "would remove",
		"file:/srv/a":      "would create, set owner deploy once made",
	} {
		if res[id].Detail != want {
			t.Errorf("%s: detail %q, want %q", id, res[id].Detail, want)
		}
	}
	wantStatus(t, res, "group:muster-web", outcome.Removed)
	if after := snapshot(t, root); after != before {
		t.Errorf("dry run changed the root:\n%s\n---\n%s", before, after)
	}
}

// Users and groups muster no longer declares are left as they are.
func TestAccountOrphansLeft(t *testing.T) {
	root := needShadow(t)
	s := &System{Root: root}
	res := s.RemoveAll(context.Background(), []Spec{{Kind: User, Name: "muster-bob"}, {Kind: Group, Name: "muster-web"}})
	for _, r := range res {
		if r.Status != outcome.OK || !strings.Contains(r.Detail, "only when it is declared absent") {
			t.Errorf("%s: %s %q", r.ID, r.Status, r.Detail)
		}
	}
	if passwdLine(t, root, "muster-bob") == "" || groupLine(t, root, "muster-web") == "" {
		t.Error("an orphaned account was removed")
	}
}

func TestAccountChecks(t *testing.T) {
	for _, c := range []struct {
		spec Spec
		want string
	}{
		{Spec{Kind: User, Name: "Deploy"}, `"Deploy" is not a user name`},
		{Spec{Kind: Group, Name: "a b"}, `"a b" is not a group name`},
		{Spec{Kind: User, Name: strings.Repeat("a", 33)}, "at most 32"},
		{Spec{Kind: User, Name: "d", UID: intp(-1)}, "uid: -1 is not an id"},
		{Spec{Kind: Group, Name: "d", GID: intp(1 << 32)}, "gid: 4294967296 is not an id"},
		{Spec{Kind: User, Name: "d", Groups: []string{}}, "groups: is empty"},
		{Spec{Kind: User, Name: "d", Groups: []string{"a", "a"}}, `groups: "a" is listed twice`},
		{Spec{Kind: User, Name: "d", Home: "home"}, `home: "home" is not absolute`},
		{Spec{Kind: User, Name: "d", GID: intp(1)}, "gid: does not apply to a user"},
		{Spec{Kind: Group, Name: "d", Shell: "/bin/sh"}, "shell: does not apply to a group"},
		{Spec{Kind: File, Path: "/a", System: true}, "system: does not apply to a file"},
		{Spec{Kind: User, Name: "d", State: "gone"}, `state: must be "present" or "absent"`},
	} {
		bad := Check(&c.spec)
		if !slices.ContainsFunc(bad, func(v Invalid) bool { return strings.Contains(v.Error(), c.want) }) {
			t.Errorf("Check(%+v) = %v, want %q", c.spec, bad, c.want)
		}
	}
	for _, ok := range []Spec{
		{Kind: User, Name: "deploy", UID: intp(0), Group: "100", Groups: []string{"adm"}, Home: "/srv/d", Shell: "/bin/sh", System: true},
		{Kind: Group, Name: "_web-1", GID: intp(4294967294), System: true},
		{Kind: User, Name: "deploy", State: "absent"},
	} {
		if bad := Check(&ok); len(bad) > 0 {
			t.Errorf("Check(%+v) = %v", ok, bad)
		}
	}
}
