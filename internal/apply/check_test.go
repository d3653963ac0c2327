package apply_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/apply"
	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/internal/ledger"
	"github.com/muster-tool/muster/internal/resource"
	"github.com/muster-tool/muster/spool"
)

// forgeDeclaration replaces h's declaration of generation gen in the spool
// by one holding specs and recovery, sealed as declare seals it (signed
// with the mesh key, encrypted to h) but never checked by declare: what a
// bug, another version of muster or a compromised pipeline could commit.
func (f *fixture) forgeDeclaration(h *testHost, gen uint64, specs []resource.Spec, recovery []ledger.Entry) {
	f.t.Helper()
	o := f.options(h)
	c, err := generation.ReadCommit(f.ctx, f.m.Spool, gen, f.meshKey())
	if err != nil {
		f.t.Fatal(err)
	}
	nodeID := o.Identity.NodeID()
	nd := generation.NodeDeclaration{
		Version: generation.FormatVersion, Generation: gen, Run: c.Run, Node: h.name, NodeID: nodeID,
		DeclaredAt: time.Now().UTC(), Resources: specs, Recovery: recovery,
	}
	rcpt, err := o.Identity.Pair.Public().Recipient()
	if err != nil {
		f.t.Fatal(err)
	}
	data, err := bundle.SealTOML(nd, generation.DeclCtx(gen, c.Run, nodeID), f.m.Pair.Sign, rcpt)
	if err != nil {
		f.t.Fatal(err)
	}
	// Objects are write-once; a spool is only files, so it is replaced
	// in place.
	obj := filepath.Join(f.spool, spool.DeclName(gen, c.Run, nodeID))
	if err := os.Chmod(obj, 0o644); err != nil {
		f.t.Fatal(err)
	}
	writeFile(f.t, obj, string(data))
}

// listTree lists every path under dir with its mode and time of change,
// for comparing a directory before and after a run; skip leaves names out.
func listTree(t *testing.T, dir string, skip ...string) string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		for _, s := range skip {
			if d.Name() == s {
				return nil
			}
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		out = append(out, rel+" "+info.Mode().String()+" "+info.ModTime().String())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// A correctly signed declaration that declare would refuse is refused
// whole by the host: one bad entry refuses the generation with the
// refusal status, naming the generation and the entry, and nothing on the
// host changes, not even the good lines beside it.
func TestHostRefusesInvalidDeclarationWhole(t *testing.T) {
	f := newFixture(t)
	h := f.enrol("web-1")
	gen := f.declare(everyNode + "[role.all.file.\"/etc/good\"]\ncontent = \"good\\n\"\n")
	good := resource.Spec{Kind: resource.File, Path: "/etc/good", State: "present", Content: "good\n"}
	file := func(p string) resource.Spec {
		return resource.Spec{Kind: resource.File, Path: p, State: "present", Content: "x\n"}
	}
	tests := []struct {
		name     string
		specs    []resource.Spec
		recovery []ledger.Entry
		want     string
	}{
		{"dot-dot", []resource.Spec{good, file("/etc/../etc/cron.d/x")},
			nil, `resource 2 of 2, file:/etc/../etc/cron.d/x: path "/etc/../etc/cron.d/x" contains ..`},
		{"dot", []resource.Spec{good, file("/etc/./x")},
			nil, `resource 2 of 2, file:/etc/./x: path "/etc/./x" is not clean`},
		{"double slash", []resource.Spec{good, file("/etc//x")},
			nil, `resource 2 of 2, file:/etc//x: path "/etc//x" is not clean`},
		{"trailing slash", []resource.Spec{good, {Kind: resource.Directory, Path: "/srv/www/", State: "present"}},
			nil, `resource 2 of 2, directory:/srv/www/: path "/srv/www/" is not clean`},
		{"relative", []resource.Spec{good, file("etc/x")},
			nil, `resource 2 of 2, file:etc/x: path "etc/x" is not absolute`},
		{"longer than the system allows", []resource.Spec{good, file("/etc/" + strings.Repeat("x", 300))},
			nil, "has a name of 300 bytes; the system allows at most 255"},
		{"newline", []resource.Spec{good, file("/etc/cron.d/x\n* * * * * root sh")},
			nil, `resource 2 of 2, "file:/etc/cron.d/x\n* * * * * root sh": path "/etc/cron.d/x\n* * * * * root sh" contains a control character`},
		{"file and directory", []resource.Spec{good, {Kind: resource.Directory, Path: "/etc/good", State: "present"}},
			nil, `resources 1 and 2 of 2, file:/etc/good and directory:/etc/good: path "/etc/good" is declared as a file and as a directory`},
		{"setuid without special_bits", []resource.Spec{good, {Kind: resource.File, Path: "/usr/local/bin/sh", State: "present", Content: "#!/bin/sh\n", Mode: "4755"}},
			nil, `resource 2 of 2, file:/usr/local/bin/sh: mode: "4755" sets the setuid bit`},
		{"unit name with a newline", []resource.Spec{good, {Kind: resource.Service, Name: "x\n.service"}},
			nil, `resource 2 of 2, "service:x\n.service"`},
		{"content that is not base64", []resource.Spec{good, {Kind: resource.File, Path: "/etc/x", State: "present", Content: "not base64!", Encoding: "base64"}},
			nil, `resource 2 of 2, file:/etc/x: content: content is not valid base64`},
		{"content over the cap", []resource.Spec{good, {Kind: resource.File, Path: "/etc/x", State: "present", Content: strings.Repeat("x", resource.MaxContent+1)}},
			nil, `resource 2 of 2, file:/etc/x: content: is 16777217 bytes, over the 16 MiB cap on a file's content`},
		{"validate that never sees the file", []resource.Spec{good, {Kind: resource.File, Path: "/etc/x", State: "present", Content: "x", Validate: []string{"/bin/true"}}},
			nil, `resource 2 of 2, file:/etc/x: validate: "/bin/true" never names the new file`},
		{"user name like an option", []resource.Spec{good, {Kind: resource.User, Name: "--badname"}},
			nil, `resource 2 of 2, user:--badname: "--badname" is not a user name`},
		{"purge on a file", []resource.Spec{good, {Kind: resource.File, Path: "/etc/x", State: "present", Content: "x", Purge: true}},
			nil, `resource 2 of 2, file:/etc/x: purge: does not apply to a file`},
		{"recovery copy climbing out", []resource.Spec{good},
			[]ledger.Entry{{ID: "file:/etc/../etc/shadow", Kind: resource.File, Path: "/etc/../etc/shadow", Created: true}},
			`recovery copy entry 1 of 1, file:/etc/../etc/shadow: path "/etc/../etc/shadow" contains ..`},
	}
	root := listTree(t, h.root)
	state := listTree(t, h.state, "declaration.cache", "apply.lock")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f.forgeDeclaration(h, gen, tc.specs, tc.recovery)
			// A run after the refused one refuses it again: the
			// declaration cache, whose declarations are not checked
			// again, holds only one that passed.
			for _, dry := range []bool{true, false, false} {
				_, err := f.apply(h, func(o *apply.Options) { o.DryRun = dry })
				wantRefused(t, err, "declaration of generation 1 refused, nothing was changed: ", tc.want)
			}
			if got := listTree(t, h.root); got != root {
				t.Errorf("the root changed:\n%s\nwas:\n%s", got, root)
			}
			if got := listTree(t, h.state, "declaration.cache", "apply.lock"); got != state {
				t.Errorf("the state changed:\n%s\nwas:\n%s", got, state)
			}
			if _, err := os.Lstat(filepath.Join(h.root, "etc/good")); err == nil {
				t.Error("the good line beside the bad one was applied")
			}
		})
	}
	if _, err := os.Stat(filepath.Join(f.spool, "report")); err == nil {
		if ents, _ := os.ReadDir(filepath.Join(f.spool, "report")); len(ents) > 0 {
			t.Errorf("a refused declaration was reported: %v", ents)
		}
	}

	// The real process exits with the refusal status and says what to do.
	_, errs, code := h.run(t, "apply")
	if code != 3 || !strings.Contains(errs, "muster: error: declaration of generation 1 refused, nothing was changed: recovery copy entry 1 of 1") ||
		!strings.Contains(errs, "muster: hint: muster declare refuses such a declaration") {
		t.Errorf("muster apply: status %d, stderr %q; want 3, the refusal and a hint", code, errs)
	}

	// A good generation declared after it is applied.
	f.declare(everyNode + "[role.all.file.\"/etc/good\"]\ncontent = \"good\\n\"\n\n[role.all.file.\"/etc/other\"]\ncontent = \"x\\n\"\n")
	if res := f.mustApply(h); res.Generation != 2 || res.Changed != 2 || res.Failed != 0 {
		t.Errorf("the next good generation: %d applied, %d changed, %d failed", res.Generation, res.Changed, res.Failed)
	}
}

// A declared file replaces a symlink muster made there (its ledger holds
// it) as it always did; a symlink someone else made fails the line,
// naming the link and its target, until the resource says
// replace_symlink = true.
func TestFileOverSymlink(t *testing.T) {
	f := newFixture(t)
	h := f.enrol("web-1")
	line := func(id string) string {
		t.Helper()
		reps := f.reports(h)
		for _, l := range reps[len(reps)-1].Lines {
			if l.ID == id {
				return string(l.Status) + " " + l.Detail
			}
		}
		t.Fatalf("no line %s in the last report", id)
		return ""
	}
	replaced := func(what, p string) {
		t.Helper()
		if got, want := line("file:"+p), "changed replaced symlink with file"; got != want {
			t.Errorf("%s: line %q, want %q", what, got, want)
		}
		if got := readFile(t, filepath.Join(h.root, p)); got != "mine\n" {
			t.Errorf("%s: content %q", what, got)
		}
	}
	f.declare(everyNode + "[role.all.symlink.\"/etc/app.conf\"]\ntarget = \"/opt/app.conf\"\n")
	f.mustApply(h)
	f.declare(everyNode + "[role.all.file.\"/etc/app.conf\"]\ncontent = \"mine\\n\"\n")
	f.mustApply(h)
	replaced("muster's own symlink", "/etc/app.conf")

	if err := os.Symlink("/opt/other.conf", filepath.Join(h.root, "etc/other.conf")); err != nil {
		t.Fatal(err)
	}
	f.declare(everyNode + "[role.all.file.\"/etc/other.conf\"]\ncontent = \"mine\\n\"\n")
	f.mustApply(h)
	want := `failed /etc/other.conf is a symlink to "/opt/other.conf" that muster does not own; muster replaces it with a file only when the resource says replace_symlink = true`
	if got := line("file:/etc/other.conf"); got != want {
		t.Errorf("someone else's symlink: line %q, want %q", got, want)
	}
	if got, err := os.Readlink(filepath.Join(h.root, "etc/other.conf")); err != nil || got != "/opt/other.conf" {
		t.Errorf("the symlink was touched: %q %v", got, err)
	}
	f.declare(everyNode + "[role.all.file.\"/etc/other.conf\"]\ncontent = \"mine\\n\"\nreplace_symlink = true\n")
	f.mustApply(h)
	replaced("replace_symlink = true", "/etc/other.conf")
}
