package declaration

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/muster-tool/muster/internal/resource"
)

// resolveOne parses files and resolves them for one node, web-01.
func resolveOne(t *testing.T, srcs []Source) map[string]resource.Spec {
	t.Helper()
	d, problems := Parse(srcs)
	if d == nil || HasErrors(problems) {
		t.Fatalf("declaration does not parse:\n%s", problemLines(problems))
	}
	resolved, _, problems := d.Resolve([]Node{{Name: "web-01"}})
	if HasErrors(problems) {
		t.Fatalf("resolve:\n%s", problemLines(problems))
	}
	out := map[string]resource.Spec{}
	for _, s := range resolved[0].Resources {
		out[s.ID()] = s
	}
	return out
}

// A source that is not text is carried as base64, decodes to its exact
// bytes, and passes the host's checks.
func TestBinarySource(t *testing.T) {
	bin := "\x30\x82\x01\x0a\x02\x82\x01\x01\x00\xff\xfe"
	srcs := writeSources(t, map[string]string{
		"site.toml": roleHead + "[role.r.file.\"/etc/ssl/cert.der\"]\nsource = \"cert.der\"\nmode = \"0644\"\n[role.r.file.\"/etc/motd\"]\nsource = \"motd\"\n",
		"cert.der":  bin,
		"motd":      "hello\n",
	})
	specs := resolveOne(t, srcs)
	der := specs["file:/etc/ssl/cert.der"]
	if der.Encoding != "base64" || der.Content != base64.StdEncoding.EncodeToString([]byte(bin)) {
		t.Errorf("binary source carried as %q %q", der.Encoding, der.Content)
	}
	if b, err := der.Bytes(); err != nil || b != bin {
		t.Errorf("decodes to %q, %v", b, err)
	}
	if motd := specs["file:/etc/motd"]; motd.Encoding != "" || motd.Content != "hello\n" {
		t.Errorf("text source carried as %q %q", motd.Encoding, motd.Content)
	}
	if err := resource.Validate([]resource.Spec{der}); err != nil {
		t.Errorf("the host would refuse it: %v", err)
	}
	// A diff shows binary content by digest and size, never its bytes.
	if got := Summary(der); got != "file:/etc/ssl/cert.der state=present content="+Digest(bin)+" (11 bytes, binary) mode=0644" {
		t.Errorf("summary %q", got)
	}
	other := der
	other.EncodeContent([]byte(bin + "\x00"))
	if got := Changes(der, other); !slices.Equal(got, []string{"content: " + Digest(bin) + " (11 bytes, binary) -> " + Digest(bin+"\x00") + " (12 bytes, binary)"}) {
		t.Errorf("changes %q", got)
	}
}

// A source over the cap is refused with the cap named, before it is read.
func TestSourceOverTheCap(t *testing.T) {
	srcs := writeSources(t, map[string]string{
		"site.toml": roleHead + "[role.r.file.\"/srv/big\"]\nsource = \"big\"\n[role.r.tree.\"/srv/t\"]\nsource = \"t\"\n",
		"t/small":   "x",
	})
	for _, p := range []string{"big", "t/huge"} {
		f, err := os.Create(filepath.Join(srcs[0].Dir, p))
		if err != nil {
			t.Fatal(err)
		}
		// Sparse: the size says what it is without a disk to back it.
		if err := f.Truncate(resource.MaxContent + 1); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	_, problems := Parse(srcs)
	got := problemLines(problems)
	for _, want := range []string{
		`site.toml:4: role.r.file."/srv/big".source: source file "big" is 16777217 bytes, over the 16 MiB (16777216 bytes) cap on a file's content`,
		`site.toml:6: role.r.tree."/srv/t".source: source file "t/huge" is 16777217 bytes, over the 16 MiB (16777216 bytes) cap on a file's content`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems:\n%s\nlack %s", got, want)
		}
	}
}

// A tree declares its directory and every directory, file and symlink in
// its source, with the source's modes or the given ones, the owner and
// group, and purge on its own directory only.
func TestTreeExpands(t *testing.T) {
	srcs := writeSources(t, map[string]string{
		"site.toml": roleHead + `[role.r.tree."/srv/www"]
source = "site/"
owner = "www-data"
group = "www-data"
purge = true
order = 250
`,
		"site/index.html":     "<h1>hi</h1>\n",
		"site/css/site.css":   "body{}\n",
		"site/img/logo.png":   "\x89PNG\r\n\x1a\n\x00",
		"site/cgi-bin/run.sh": "#!/bin/sh\n",
	})
	dir := srcs[0].Dir
	chmod := func(p string, m os.FileMode) {
		if err := os.Chmod(filepath.Join(dir, p), m); err != nil {
			t.Fatal(err)
		}
	}
	chmod("site/cgi-bin/run.sh", 0o750)
	chmod("site", 0o755)
	chmod("site/css", 0o755)
	chmod("site/img", 0o755)
	chmod("site/cgi-bin", 0o755)
	chmod("site/index.html", 0o644)
	chmod("site/css/site.css", 0o644)
	chmod("site/img/logo.png", 0o644)
	if err := os.Symlink("index.html", filepath.Join(dir, "site/home.html")); err != nil {
		t.Fatal(err)
	}
	specs := resolveOne(t, srcs)
	var ids []string
	for id := range specs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	want := []string{
		"directory:/srv/www", "directory:/srv/www/cgi-bin", "directory:/srv/www/css", "directory:/srv/www/img",
		"file:/srv/www/cgi-bin/run.sh", "file:/srv/www/css/site.css", "file:/srv/www/img/logo.png", "file:/srv/www/index.html",
		"symlink:/srv/www/home.html",
	}
	if !slices.Equal(ids, want) {
		t.Fatalf("ids %q\nwant %q", ids, want)
	}
	root := specs["directory:/srv/www"]
	if !root.Purge || root.Mode != "0755" || root.Owner != "www-data" || root.Order != 250 {
		t.Errorf("tree directory %+v", root)
	}
	if specs["directory:/srv/www/css"].Purge {
		t.Error("purge spread below the tree's own directory")
	}
	if s := specs["file:/srv/www/cgi-bin/run.sh"]; s.Mode != "0750" || s.Group != "www-data" || s.Content != "#!/bin/sh\n" || s.Order != 250 {
		t.Errorf("script %+v", s)
	}
	if s := specs["file:/srv/www/img/logo.png"]; s.Encoding != "base64" {
		t.Errorf("binary file in a tree carried as %q", s.Encoding)
	}
	if s := specs["symlink:/srv/www/home.html"]; s.Target != "index.html" || s.Owner != "" {
		t.Errorf("symlink %+v", s)
	}
	var all []resource.Spec
	for _, id := range ids {
		all = append(all, specs[id])
	}
	if err := resource.Validate(all); err != nil {
		t.Errorf("the host would refuse the tree: %v", err)
	}

	// One mode for files and one for directories replace the source's.
	srcs[0].Data = []byte(roleHead + "[role.r.tree.\"/srv/www\"]\nsource = \"site\"\nfile_mode = \"0640\"\ndirectory_mode = \"750\"\n")
	specs = resolveOne(t, srcs)
	if specs["file:/srv/www/cgi-bin/run.sh"].Mode != "0640" || specs["file:/srv/www/index.html"].Mode != "0640" || specs["directory:/srv/www/img"].Mode != "0750" || specs["directory:/srv/www"].Mode != "0750" {
		t.Errorf("given modes not used: %+v", specs)
	}
}

// What a tree cannot hold is an error naming the entry.
func TestTreeRefusals(t *testing.T) {
	srcs := writeSources(t, map[string]string{
		"site.toml": roleHead + "[role.r.tree.\"/srv/a\"]\nsource = \"a\"\n[role.r.tree.\"/srv/b\"]\nsource = \"b\"\n",
		"a/tool":    "x",
		"b/x":       "x",
	})
	dir := srcs[0].Dir
	if err := os.Chmod(filepath.Join(dir, "a/tool"), 0o755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("bad\ntarget", filepath.Join(dir, "b/link")); err != nil {
		t.Fatal(err)
	}
	_, problems := Parse(srcs)
	got := problemLines(problems)
	for _, want := range []string{
		`site.toml:4: role.r.tree."/srv/a".source: file:/srv/a/tool in the tree (a/tool): mode: "4755" sets the setuid bit; add special_bits = true to this resource to allow it`,
		`site.toml:6: role.r.tree."/srv/b".source: symlink:/srv/b/link in the tree (b/link): target: "bad\ntarget" contains a control character`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems:\n%s\nlack %s", got, want)
		}
	}
}

// Users and groups resolve to their specs.
func TestAccountsParse(t *testing.T) {
	srcs := writeSources(t, map[string]string{
		"site.toml": roleHead + `[role.r.group.web]
gid = 4300
system = true

[role.r.user.deploy]
uid = 4400
group = "web"
groups = ["adm", "web"]
home = "/srv/deploy"
shell = "/bin/bash"

[role.r.user.old]
state = "absent"
`,
	})
	specs := resolveOne(t, srcs)
	if g := specs["group:web"]; g.GID == nil || *g.GID != 4300 || !g.System || g.State != "present" {
		t.Errorf("group %+v", g)
	}
	u := specs["user:deploy"]
	if u.UID == nil || *u.UID != 4400 || u.Group != "web" || !slices.Equal(u.Groups, []string{"adm", "web"}) || u.Home != "/srv/deploy" || u.Shell != "/bin/bash" {
		t.Errorf("user %+v", u)
	}
	if o := specs["user:old"]; o.State != "absent" {
		t.Errorf("absent user %+v", o)
	}
	if got := Summary(u); got != "user:deploy state=present group=web uid=4400 groups=adm,web home=/srv/deploy shell=/bin/bash" {
		t.Errorf("summary %q", got)
	}
}
