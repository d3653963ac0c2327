package resource

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/muster-tool/muster/internal/outcome"
)

func TestCheck(t *testing.T) {
	long := "/" + strings.Repeat("a/", 2048) + "b"
	longName := "/etc/" + strings.Repeat("n", 256)
	tests := []struct {
		name  string
		spec  Spec
		field string // "" with reason "" means valid
		want  string
	}{
		{"file", Spec{Kind: File, Path: "/etc/motd", Content: "hi\n", Mode: "0644", Owner: "root", Group: "0", State: "present"}, "", ""},
		{"three-digit mode", Spec{Kind: Directory, Path: "/srv", Mode: "755"}, "", ""},
		{"absent file", Spec{Kind: File, Path: "/etc/motd", State: "absent"}, "", ""},
		{"symlink", Spec{Kind: Symlink, Path: "/usr/bin/vi", Target: "vim"}, "", ""},
		{"package", Spec{Kind: Package, Name: "nginx", Version: "1.22.1-9+deb12u1"}, "", ""},
		{"service", Spec{Kind: Service, Name: "nginx.service", Enabled: ptr(true), RestartOn: []string{"/etc/nginx/nginx.conf"}}, "", ""},
		{"setuid with opt-in", Spec{Kind: File, Path: "/usr/bin/tool", Mode: "4755", SpecialBits: true}, "", ""},
		{"sticky directory with opt-in", Spec{Kind: Directory, Path: "/srv/drop", Mode: "1777", SpecialBits: true}, "", ""},

		{"empty path", Spec{Kind: File}, "", `path "" is empty`},
		{"relative path", Spec{Kind: File, Path: "etc/motd"}, "", `path "etc/motd" is not absolute`},
		{"dot-dot", Spec{Kind: File, Path: "/etc/../shadow"}, "", `path "/etc/../shadow" contains ..`},
		{"dot", Spec{Kind: File, Path: "/etc/./motd"}, "", `path "/etc/./motd" is not clean; write "/etc/motd"`},
		{"double slash", Spec{Kind: Directory, Path: "/etc//app"}, "", `path "/etc//app" is not clean; write "/etc/app"`},
		{"trailing slash", Spec{Kind: Directory, Path: "/srv/www/"}, "", `path "/srv/www/" is not clean; write "/srv/www"`},
		{"root", Spec{Kind: Directory, Path: "/"}, "", `path "/" is the root directory`},
		{"newline", Spec{Kind: File, Path: "/etc/mo\ntd"}, "", `path "/etc/mo\ntd" contains a control character`},
		{"escape", Spec{Kind: Symlink, Path: "/etc/\x1b[2Jx", Target: "y"}, "", `path "/etc/\x1b[2Jx" contains a control character`},
		{"NUL", Spec{Kind: File, Path: "/etc/a\x00b"}, "", `contains a control character`},
		{"DEL", Spec{Kind: File, Path: "/etc/a\x7fb"}, "", `contains a control character`},
		{"C1 control", Spec{Kind: File, Path: "/etc/a\u0085b"}, "", `contains a control character`},
		{"not UTF-8", Spec{Kind: File, Path: "/etc/\xff"}, "", `is not valid UTF-8`},
		{"path too long", Spec{Kind: File, Path: long}, "", "the system allows at most 4095"},
		{"name too long", Spec{Kind: File, Path: longName}, "", "has a name of 256 bytes; the system allows at most 255"},
		{"unknown state", Spec{Kind: File, Path: "/a", State: "gone"}, "state", `must be "present" or "absent", not "gone"`},
		{"unknown type", Spec{Kind: "cron", Path: "/a"}, "", `unknown resource type "cron"`},

		{"mode not octal", Spec{Kind: File, Path: "/a", Mode: "0999"}, "mode", `"0999" is not a mode`},
		{"mode too long", Spec{Kind: File, Path: "/a", Mode: "00644"}, "mode", `"00644" is not a mode`},
		{"setuid without opt-in", Spec{Kind: File, Path: "/usr/bin/tool", Mode: "4755"}, "mode", `"4755" sets the setuid bit; add special_bits = true`},
		{"setgid without opt-in", Spec{Kind: Directory, Path: "/srv/shared", Mode: "2775"}, "mode", `"2775" sets the setgid bit`},
		{"sticky without opt-in", Spec{Kind: Directory, Path: "/srv/drop", Mode: "1777"}, "mode", `"1777" sets the sticky bit`},
		{"every special bit", Spec{Kind: File, Path: "/a", Mode: "7755"}, "mode", `sets the setuid, setgid and sticky bits`},
		{"bad owner", Spec{Kind: File, Path: "/a", Owner: "ro ot"}, "owner", `"ro ot" is not a user or group`},
		{"owner with a newline", Spec{Kind: File, Path: "/a", Owner: "root\n"}, "owner", `"root\n" is not a user or group`},
		{"group with a colon", Spec{Kind: Directory, Path: "/a", Group: "a:b"}, "group", `"a:b" is not a user or group`},

		{"symlink without target", Spec{Kind: Symlink, Path: "/a"}, "target", "a symlink needs a target"},
		{"target with a newline", Spec{Kind: Symlink, Path: "/a", Target: "b\nc"}, "target", `"b\nc" contains a control character`},
		{"absent symlink needs no target", Spec{Kind: Symlink, Path: "/a", State: "absent"}, "", ""},

		{"package like an option", Spec{Kind: Package, Name: "-oops"}, "", `"-oops" is not a package name`},
		{"package with a newline", Spec{Kind: Package, Name: "nginx\nx"}, "", `"nginx\nx" is not a package name`},
		{"bad version", Spec{Kind: Package, Name: "nginx", Version: "1.0 beta"}, "version", `"1.0 beta" is not a version`},
		{"unit with a space", Spec{Kind: Service, Name: "a b.service"}, "", `"a b.service" is not a systemd unit name: it contains a space`},
		{"unit with a control character", Spec{Kind: Service, Name: "a\x07.service"}, "", `it contains a control character`},
		{"unit like an option", Spec{Kind: Service, Name: "-x.service"}, "", `it starts with -`},
		{"restart_on with ..", Spec{Kind: Service, Name: "a.service", RestartOn: []string{"/etc/../x"}}, "restart_on", `entry "/etc/../x" contains ..`},
		{"restart_on with a tab", Spec{Kind: Service, Name: "a.service", RestartOn: []string{"/etc/a\tb"}}, "restart_on", `entry "/etc/a\tb" contains a control character`},

		{"mode on a symlink", Spec{Kind: Symlink, Path: "/a", Target: "b", Mode: "0644"}, "mode", "does not apply to a symlink"},
		{"content on a directory", Spec{Kind: Directory, Path: "/a", Content: "x"}, "content", "does not apply to a directory"},
		{"target on a file", Spec{Kind: File, Path: "/a", Target: "b"}, "target", "does not apply to a file"},
		{"name on a file", Spec{Kind: File, Path: "/a", Name: "x"}, "name", "does not apply to a file"},
		{"path on a package", Spec{Kind: Package, Name: "x", Path: "/a"}, "path", "does not apply to a package"},
		{"version on a service", Spec{Kind: Service, Name: "x.service", Version: "1"}, "version", "does not apply to a service"},
		{"state on a service", Spec{Kind: Service, Name: "x.service", State: "absent"}, "state", "does not apply to a service"},
		{"enabled on a package", Spec{Kind: Package, Name: "x", Enabled: ptr(true)}, "enabled", "does not apply to a package"},
		{"secret on a symlink", Spec{Kind: Symlink, Path: "/a", Target: "b", Secret: true}, "secret", "does not apply to a symlink"},
		{"special_bits on a symlink", Spec{Kind: Symlink, Path: "/a", Target: "b", SpecialBits: true}, "special_bits", "does not apply to a symlink"},
		{"replace_symlink on a symlink", Spec{Kind: Symlink, Path: "/a", Target: "b", ReplaceSymlink: true}, "replace_symlink", "does not apply to a symlink"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bad := Check(&tc.spec)
			if tc.want == "" {
				if len(bad) > 0 {
					t.Fatalf("Check = %v, want nothing wrong", bad)
				}
				return
			}
			if len(bad) == 0 {
				t.Fatalf("Check found nothing wrong; want %s: %s", tc.field, tc.want)
			}
			if bad[0].Field != tc.field || !strings.Contains(bad[0].Reason, tc.want) {
				t.Errorf("Check = %q (field %q), want field %q and a reason containing %q", bad[0].Reason, bad[0].Field, tc.field, tc.want)
			}
			if strings.ContainsAny(bad[0].Error(), "\n\t\x00\x07\x1b") {
				t.Errorf("reason %q carries a control character through", bad[0].Error())
			}
		})
	}
}

func TestClashes(t *testing.T) {
	tests := []struct {
		name  string
		specs []Spec
		want  []Clash
	}{
		{"distinct", []Spec{file("/a", ""), {Kind: Directory, Path: "/b"}, {Kind: Package, Name: "a"}, {Kind: Service, Name: "a.service"}}, nil},
		{"file and directory", []Spec{file("/a", ""), {Kind: Directory, Path: "/b"}, {Kind: Directory, Path: "/a"}}, []Clash{{0, 2}}},
		{"symlink and file", []Spec{{Kind: Symlink, Path: "/a", Target: "b"}, file("/a", "")}, []Clash{{0, 1}}},
		{"one file twice", []Spec{file("/a", "x"), file("/a", "x")}, []Clash{{0, 1}}},
		{"one package twice", []Spec{{Kind: Package, Name: "a"}, {Kind: Package, Name: "a", Version: "latest"}}, []Clash{{0, 1}}},
		{"a package and a path of one name", []Spec{{Kind: Package, Name: "/a"}, file("/a", "")}, nil},
		{"three at one path", []Spec{file("/a", ""), {Kind: Directory, Path: "/a"}, {Kind: Symlink, Path: "/a", Target: "b"}}, []Clash{{0, 1}, {0, 2}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Clashes(tc.specs)
			if len(got) != len(tc.want) {
				t.Fatalf("Clashes = %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("Clashes = %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestValidateNamesTheEntry(t *testing.T) {
	good := []Spec{file("/etc/a", "a"), {Kind: Package, Name: "curl"}}
	if err := Validate(good); err != nil {
		t.Fatalf("Validate(good) = %v", err)
	}
	tests := []struct {
		name         string
		specs        []Spec
		index, other int
		want         string
	}{
		{"one bad spec", append(good, file("/etc//b", "b")), 2, -1,
			`resource 3 of 3, file:/etc//b: path "/etc//b" is not clean; write "/etc/b"`},
		{"a control character", append(good, file("/etc/b\nc", "b")), 2, -1,
			`resource 3 of 3, "file:/etc/b\nc": path "/etc/b\nc" contains a control character`},
		{"a setting", []Spec{{Kind: Directory, Path: "/srv", Mode: "2775"}}, 0, -1,
			`resource 1 of 1, directory:/srv: mode: "2775" sets the setgid bit; add special_bits = true to this resource to allow it`},
		{"file and directory", append(good, Spec{Kind: Directory, Path: "/etc/a"}), 2, 0,
			`resources 1 and 3 of 3, file:/etc/a and directory:/etc/a: path "/etc/a" is declared as a file and as a directory; a path has one type`},
		{"one resource twice", append(good, Spec{Kind: Package, Name: "curl", Version: "latest"}), 2, 1,
			`resources 2 and 3 of 3, package:curl and package:curl: package:curl is declared twice`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(tc.specs)
			var ie *InvalidError
			if !errors.As(err, &ie) {
				t.Fatalf("Validate = %v, want an *InvalidError", err)
			}
			if ie.Index != tc.index || ie.Other != tc.other || err.Error() != tc.want {
				t.Errorf("Validate = %d/%d %q\nwant %d/%d %q", ie.Index, ie.Other, err, tc.index, tc.other, tc.want)
			}
		})
	}
}

// A file or directory declared where a symlink is that muster does not own
// fails its line, naming the link and its target, and the link stays; with
// replace_symlink, or when the host owns the link, it is replaced.
func TestApplyLeavesForeignSymlink(t *testing.T) {
	for _, kind := range []Kind{File, Directory} {
		t.Run(string(kind), func(t *testing.T) {
			root := newRoot(t)
			link := filepath.Join(root, "etc/app.conf")
			if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("/opt/app/app.conf", link); err != nil {
				t.Fatal(err)
			}
			spec := Spec{Kind: kind, Path: "/etc/app.conf"}
			if kind == File {
				spec.Content = "declared\n"
			}
			want := `/etc/app.conf is a symlink to "/opt/app/app.conf" that muster does not own; muster replaces it with a ` + string(kind) + ` only when the resource says replace_symlink = true`
			for _, dry := range []bool{true, false} {
				r := wantStatus(t, apply(t, &System{Root: root, DryRun: dry}, spec), spec.ID(), outcome.Failed)
				if r.Detail != want {
					t.Errorf("dry run %t: detail %q, want %q", dry, r.Detail, want)
				}
			}
			if got, err := os.Readlink(link); err != nil || got != "/opt/app/app.conf" {
				t.Fatalf("the symlink was touched: %q %v", got, err)
			}

			// The host owns a symlink of that path: replaced as before.
			owns := func(id string) bool { return id == "symlink:/etc/app.conf" }
			s := &System{Root: root, Owns: owns, DryRun: true}
			r := wantStatus(t, apply(t, s, spec), spec.ID(), outcome.Changed)
			if r.Detail != "would replace symlink with "+string(kind) {
				t.Errorf("owned link, dry run: %q", r.Detail)
			}
			if _, err := os.Readlink(link); err != nil {
				t.Fatal("a dry run replaced the symlink")
			}

			spec.ReplaceSymlink = true
			r = wantStatus(t, apply(t, &System{Root: root}, spec), spec.ID(), outcome.Changed)
			if r.Detail != "replaced symlink with "+string(kind) {
				t.Errorf("replace_symlink: detail %q", r.Detail)
			}
			fi, _ := lstat(t, root, spec.Path)
			if fi.Mode()&os.ModeSymlink != 0 || (kind == Directory) != fi.IsDir() {
				t.Errorf("after replace_symlink: %v", fi.Mode())
			}
		})
	}
}

// A symlink the host owns (muster made it) is replaced by a declared file
// without replace_symlink, for real.
func TestApplyReplacesOwnedSymlink(t *testing.T) {
	root := newRoot(t)
	s := &System{Root: root}
	link := Spec{Kind: Symlink, Path: "/etc/app.conf", Target: "/opt/app.conf"}
	wantStatus(t, apply(t, s, link), link.ID(), outcome.Changed)
	s.Owns = func(id string) bool { return id == link.ID() }
	f := file("/etc/app.conf", "declared\n")
	if r := wantStatus(t, apply(t, s, f), f.ID(), outcome.Changed); r.Detail != "replaced symlink with file" {
		t.Errorf("detail %q", r.Detail)
	}
	if got := read(t, root, "/etc/app.conf"); got != "declared\n" {
		t.Errorf("content %q", got)
	}
}

// The set-id and sticky bits are named in a dry run's detail and in the
// line of the run that sets them.
func TestSpecialBitsShown(t *testing.T) {
	root := newRoot(t)
	tool := Spec{Kind: File, Path: "/usr/local/bin/tool", Content: "#!/bin/sh\n", Mode: "4755", SpecialBits: true}
	drop := Spec{Kind: Directory, Path: "/srv/drop", Mode: "1777", SpecialBits: true}
	res := apply(t, &System{Root: root, DryRun: true}, tool, drop)
	if r := wantStatus(t, res, tool.ID(), outcome.Changed); r.Detail != "would create, setuid mode 4755" {
		t.Errorf("dry run: %q", r.Detail)
	}
	if r := wantStatus(t, res, drop.ID(), outcome.Changed); r.Detail != "would create, sticky mode 1777" {
		t.Errorf("dry run: %q", r.Detail)
	}
	res = apply(t, &System{Root: root}, tool, drop)
	if r := wantStatus(t, res, tool.ID(), outcome.Changed); r.Detail != "created, setuid mode 4755" {
		t.Errorf("apply: %q", r.Detail)
	}
	if _, st := lstat(t, root, tool.Path); st.Mode&0o7777 != 0o4755 {
		t.Errorf("mode %o", st.Mode&0o7777)
	}

	// A mode change that adds a bit says which.
	tool.Mode = "6755"
	res = apply(t, &System{Root: root, DryRun: true}, tool)
	if r := wantStatus(t, res, tool.ID(), outcome.Changed); r.Detail != "would change mode 4755 → 6755 (setuid and setgid)" {
		t.Errorf("dry run of a mode change: %q", r.Detail)
	}
	// Applying it unchanged shows nothing.
	tool.Mode = "4755"
	if r := wantStatus(t, apply(t, &System{Root: root}, tool), tool.ID(), outcome.OK); r.Detail != "" {
		t.Errorf("unchanged: %q", r.Detail)
	}
}
