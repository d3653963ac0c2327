package declare

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/declaration"
	"github.com/muster-tool/muster/internal/enrol"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/internal/ledger"
	"github.com/muster-tool/muster/internal/outcome"
	"github.com/muster-tool/muster/internal/resource"
	"github.com/muster-tool/muster/spool"
)

const webSite = `
[role.web]
nodes = ["web-*"]

[role.web.file."/etc/motd"]
content = "managed by muster\n"
mode = "0644"

[role.web.directory."/srv/www"]
mode = "0755"

[role.web.package.nginx]
version = "latest"
`

// commit reads committed generation gen's commit.
func (f *fixture) commit(gen uint64) *generation.Commit {
	f.t.Helper()
	c, err := generation.ReadCommit(f.ctx, f.m.Spool, gen, f.m.Pair.Sign.Public().(ed25519.PublicKey))
	if err != nil {
		f.t.Fatalf("commit of generation %d: %v", gen, err)
	}
	return c
}

// open reads node's bundle of committed generation gen the way apply
// does, decrypting it with the key of node as.
func (f *fixture) open(node string, gen uint64, as string) (*generation.NodeDeclaration, error) {
	f.t.Helper()
	id := f.reg.Enrolled(node)
	c := f.commit(gen)
	name := spool.DeclName(gen, c.Run, id.NodeID)
	data, err := f.m.Spool.Get(f.ctx, name, 0)
	if err != nil {
		return nil, err
	}
	var nd generation.NodeDeclaration
	err = bundle.OpenTOML(data, generation.DeclCtx(gen, c.Run, id.NodeID), f.pairs[as].Age, f.m.Pair.Sign.Public().(ed25519.PublicKey), &nd)
	return &nd, err
}

func (f *fixture) mustOpen(node string, gen uint64) *generation.NodeDeclaration {
	f.t.Helper()
	nd, err := f.open(node, gen, node)
	if err != nil {
		f.t.Fatalf("node %s opens its declaration of generation %d: %v", node, gen, err)
	}
	return nd
}

func ids(specs []resource.Spec) []string {
	var out []string
	for _, s := range specs {
		out = append(out, s.ID())
	}
	return out
}

func committed(f *fixture) []uint64 {
	f.t.Helper()
	gens, err := generation.Committed(f.ctx, f.m.Spool)
	if err != nil {
		f.t.Fatal(err)
	}
	return gens
}

func TestDeclareCommitsOneBundlePerNode(t *testing.T) {
	f := newFixture(t)
	f.enrol("web-1", nil)
	f.enrol("web-2", nil)
	res := f.mustDeclare(f.parse(webSite, nil), Options{})
	if res.Generation != 1 || res.Previous != 0 || res.Unchanged || res.DryRun || res.Run == "" {
		t.Fatalf("result = %+v, want generation 1 committed", res)
	}
	c := f.commit(1)
	if c.Run != res.Run {
		t.Errorf("commit names run %s, declare reported %s", c.Run, res.Run)
	}
	want := []string{
		spool.CommitName(1),
		spool.DeclName(1, c.Run, f.reg.Enrolled("web-1").NodeID),
		spool.DeclName(1, c.Run, f.reg.Enrolled("web-2").NodeID),
		spool.SettingsName(1, c.Run),
		spool.ManifestName(1, c.Run),
		spool.MeshKeysName,
	}
	slices.Sort(want)
	if got := f.objects(); !slices.Equal(got, want) {
		t.Errorf("spool holds\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, n := range []string{"web-1", "web-2"} {
		nd := f.mustOpen(n, 1)
		if nd.Node != n || nd.NodeID != f.reg.Enrolled(n).NodeID || nd.Generation != 1 || nd.Run != c.Run {
			t.Errorf("%s's declaration is addressed to %s (%s), generation %d run %s", n, nd.Node, nd.NodeID, nd.Generation, nd.Run)
		}
		if got := ids(nd.Resources); !slices.Equal(got, []string{"directory:/srv/www", "file:/etc/motd", "package:nginx"}) {
			t.Errorf("%s's resources = %v", n, got)
		}
		if nd.Resources[1].Content != "managed by muster\n" || nd.Resources[1].Mode != "0644" {
			t.Errorf("%s's motd = %+v", n, nd.Resources[1])
		}
	}
	if len(res.Nodes) != 2 || len(res.Nodes[0].Added) != 3 {
		t.Errorf("changes = %+v, want two nodes with three resources added", res.Nodes)
	}
}

// Nodes with a node section of their own are resolved one at a time into
// one buffer that is reused: each must still get its own resources, the
// nodes between them the shared ones, and an unmatched node among them
// nothing.
func TestNodeSectionsEachGetTheirOwn(t *testing.T) {
	f := newFixture(t)
	for _, n := range []string{"db-1", "web-1", "web-2", "web-3", "web-4"} {
		f.enrol(n, nil)
	}
	src := webSite
	for _, n := range []string{"web-1", "web-2", "web-4"} {
		src += fmt.Sprintf("\n[node.%s.file.\"/etc/hostname\"]\ncontent = \"%s\\n\"\n", n, n)
	}
	src += "\n[node.web-2.package.nginx]\nversion = \"1.2-3\"\n"
	res := f.mustDeclare(f.parse(src, nil), Options{})
	if !slices.Equal(res.Unmatched, []string{"db-1"}) || len(res.Nodes) != 4 {
		t.Fatalf("nodes %+v, unmatched %v; want the four web nodes and db-1 unmatched", res.Nodes, res.Unmatched)
	}
	for _, n := range []string{"web-1", "web-2", "web-3", "web-4"} {
		nd := f.mustOpen(n, 1)
		want := []string{"directory:/srv/www", "file:/etc/hostname", "file:/etc/motd", "package:nginx"}
		if n == "web-3" {
			want = slices.Delete(want, 1, 2)
		}
		if got := ids(nd.Resources); !slices.Equal(got, want) {
			t.Errorf("%s's resources = %v, want %v", n, got, want)
			continue
		}
		if n != "web-3" && nd.Resources[1].Content != n+"\n" {
			t.Errorf("%s's host name file holds %q", n, nd.Resources[1].Content)
		}
		version := map[bool]string{false: "latest", true: "1.2-3"}[n == "web-2"]
		if v := nd.Resources[len(nd.Resources)-1].Version; v != version {
			t.Errorf("%s's nginx version = %q, want %q", n, v, version)
		}
	}
}

// A node's bundle is encrypted to that node alone: another node's key,
// and the mesh's own key, cannot open it.
func TestBundleCannotBeReadWithAnotherNodesKey(t *testing.T) {
	f := newFixture(t)
	f.enrol("web-1", nil)
	f.enrol("web-2", nil)
	f.mustDeclare(f.parse(webSite, nil), Options{})
	_, err := f.open("web-1", 1, "web-2")
	if !errors.Is(err, bundle.ErrWrongRecipient) || fault.ClassOf(err) != fault.Refused {
		t.Errorf("web-2 opens web-1's declaration: err = %v, want a refusal: not encrypted to this identity", err)
	}
	c := f.commit(1)
	data, err := f.m.Spool.Get(f.ctx, spool.DeclName(1, c.Run, f.reg.Enrolled("web-1").NodeID), 0)
	if err != nil {
		t.Fatal(err)
	}
	h, err := bundle.Inspect(data)
	if err != nil {
		t.Fatal(err)
	}
	if h.Recipients != 1 {
		t.Errorf("web-1's declaration has %d recipients, want 1", h.Recipients)
	}
	var nd generation.NodeDeclaration
	err = bundle.OpenTOML(data, generation.DeclCtx(1, c.Run, f.reg.Enrolled("web-1").NodeID), f.m.Pair.Age, f.m.Pair.Sign.Public().(ed25519.PublicKey), &nd)
	if !errors.Is(err, bundle.ErrWrongRecipient) {
		t.Errorf("the mesh opens web-1's declaration: err = %v, want not encrypted to this identity", err)
	}
}

func TestIneligibleAndUnmatchedNodesGetNothing(t *testing.T) {
	f := newFixture(t)
	f.enrol("web-1", nil)
	bad := f.enrol("web-2", nil)
	f.briefs[bad.NodeID] = failedBriefing("web-2")
	silent := f.enrol("web-3", nil)
	delete(f.briefs, silent.NodeID)
	f.enrol("db-1", nil)
	res := f.mustDeclare(f.parse(webSite, nil), Options{})

	if len(res.Nodes) != 1 || res.Nodes[0].Name != "web-1" {
		t.Errorf("nodes = %+v, want web-1 only", res.Nodes)
	}
	wantIn := []Ineligible{
		{Name: "web-2", Failed: []outcome.Line{{ID: "disk:/", Status: outcome.Failed, Detail: "12 MB free, want 999999999 MB"}}},
		{Name: "web-3", Failed: []outcome.Line{{ID: "briefing", Status: outcome.Failed, Detail: "no briefing received from identity " + silent.NodeID}}},
	}
	if !reflect.DeepEqual(res.Ineligible, wantIn) {
		t.Errorf("ineligible = %+v\nwant %+v", res.Ineligible, wantIn)
	}
	if !slices.Equal(res.Unmatched, []string{"db-1"}) {
		t.Errorf("unmatched = %v, want [db-1]", res.Unmatched)
	}
	decls := nodeBundles(f.objects(), spool.DeclPrefix)
	if len(decls) != 1 || !strings.HasSuffix(decls[0], f.reg.Enrolled("web-1").NodeID) {
		t.Errorf("bundles written: %v, want web-1's only", decls)
	}
	man, err := ReadManifest(f.ctx, f.m, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(man.Ineligible, []string{"web-2", "web-3"}) || !slices.Equal(man.Unassigned, []string{"db-1"}) {
		t.Errorf("manifest: ineligible %v, unassigned %v", man.Ineligible, man.Unassigned)
	}

	// Once web-2 briefs again and passes, the next declare gives it its
	// resources; web-3 stays ineligible.
	f.briefs[bad.NodeID] = passed("web-2")
	res = f.mustDeclare(f.parse(webSite, nil), Options{})
	if res.Generation != 2 || len(res.Nodes) != 2 || len(res.Ineligible) != 1 {
		t.Errorf("after web-2 passes: %+v", res)
	}
	f.mustOpen("web-2", 2)
}

func TestRevokedNodeGetsNothing(t *testing.T) {
	f := newFixture(t)
	old := f.enrol("web-1", nil)
	oldPair := f.pairs["web-1"]
	f.mustDeclare(f.parse(webSite, nil), Options{})
	// Re-enrolled: the old identity is revoked, the new one gets the
	// declaration and nothing is encrypted to the old one any more.
	f.enrol("web-1", nil)
	res := f.mustDeclare(f.parse(webSite, nil), Options{})
	if res.Unchanged || res.Generation != 2 {
		t.Fatalf("after re-enrolment: %+v, want generation 2", res)
	}
	if n := res.Nodes[0]; n.PreviousNodeID != old.NodeID || n.Same() {
		t.Errorf("change = %+v, want previous identity %s", n, old.NodeID)
	}
	c := f.commit(2)
	if _, err := f.m.Spool.Stat(f.ctx, spool.DeclName(2, c.Run, old.NodeID)); !errors.Is(err, spool.ErrNotFound) {
		t.Errorf("revoked identity got a bundle in generation 2: %v", err)
	}
	nd := f.mustOpen("web-1", 2)
	if nd.NodeID == old.NodeID {
		t.Error("generation 2 is addressed to the revoked identity")
	}
	f.pairs["old"] = oldPair
	if _, err := f.open("web-1", 2, "old"); !errors.Is(err, bundle.ErrWrongRecipient) {
		t.Errorf("the revoked identity opens generation 2: %v", err)
	}
}

// What counts as unchanged: the same resources for the same node
// identities with the same prune option, and the same ineligible and
// unmatched nodes. Each row changes one thing from the base and says
// whether a new generation follows.
func TestUnchangedDeclarationWritesNothing(t *testing.T) {
	base := webSite
	tests := []struct {
		name    string
		change  func(f *fixture) string
		unchang bool
	}{
		{"same source", func(f *fixture) string { return base }, true},
		{"comments, order and layout only", func(f *fixture) string {
			return "# reordered\n[role.web.package.nginx]\nversion = \"latest\"\n\n[role.web]\nnodes = [ \"web-*\" ]\n\n[role.web.directory.\"/srv/www\"]\nmode = \"0755\"\n\n[role.web.file.\"/etc/motd\"]\nmode = \"0644\"\ncontent = \"managed by muster\\n\"\n"
		}, true},
		{"the same resources from two roles", func(f *fixture) string {
			return base + "\n[role.also]\nnodes = [\"web-1\"]\n[role.also.package.nginx]\nversion = \"latest\"\n"
		}, true},
		{"a new recovery copy only", func(f *fixture) string { return base }, true},
		{"content", func(f *fixture) string { return strings.Replace(base, "managed by muster", "managed by muster!", 1) }, false},
		{"mode", func(f *fixture) string { return strings.Replace(base, `mode = "0755"`, `mode = "0750"`, 1) }, false},
		{"prune", func(f *fixture) string { return "prune = true\n" + base }, false},
		{"a resource added", func(f *fixture) string { return base + "\n[role.web.package.curl]\n" }, false},
		{"a node re-enrolled", func(f *fixture) string { f.enrol("web-2", nil); return base }, false},
		{"a node ineligible", func(f *fixture) string {
			f.briefs[f.reg.Enrolled("web-2").NodeID] = failedBriefing("web-2")
			return base
		}, false},
		{"a new unmatched node", func(f *fixture) string { f.enrol("db-1", nil); return base }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.enrol("web-1", nil)
			f.enrol("web-2", nil)
			f.mustDeclare(f.parse(base, nil), Options{})
			before := files(t, f.dir+"/spool")
			src := tt.change(f)
			o := Options{Recovery: func(string) (Recovery, bool) {
				return Recovery{NodeID: "x", Ledger: []ledger.Entry{{ID: "file:/etc/old", Kind: resource.File, Path: "/etc/old"}}}, true
			}}
			res := f.mustDeclare(f.parse(src, nil), o)
			if res.Unchanged != tt.unchang {
				t.Fatalf("unchanged = %v, want %v (%+v)", res.Unchanged, tt.unchang, res)
			}
			if tt.unchang {
				if res.Generation != 1 || res.Previous != 1 || res.Run != "" {
					t.Errorf("result = %+v, want generation 1 standing", res)
				}
				if after := files(t, f.dir+"/spool"); !slices.Equal(before, after) {
					t.Errorf("an unchanged declaration wrote to the spool:\nbefore %v\nafter  %v", before, after)
				}
				return
			}
			if res.Generation != 2 || !slices.Equal(committed(f), []uint64{2, 1}) {
				t.Errorf("result = %+v, committed %v, want generation 2", res, committed(f))
			}
		})
	}
}

func TestDryRunShowsChangesAndWritesNothing(t *testing.T) {
	f := newFixture(t)
	f.enrol("web-1", nil)
	f.enrol("web-2", nil)
	f.mustDeclare(f.parse(webSite, nil), Options{})
	f.enrol("web-3", nil)
	src := strings.Replace(webSite, "managed by muster", "managed by muster, changed", 1)
	src = strings.Replace(src, "[role.web.package.nginx]\nversion = \"latest\"\n", "[role.web.package.curl]\n", 1)
	src += "\n[node.web-2.file.\"/etc/hostname\"]\ncontent = \"web-2\\n\"\n"
	before := files(t, f.dir)
	res := f.mustDeclare(f.parse(src, nil), Options{DryRun: true})
	if after := files(t, f.dir); !slices.Equal(before, after) {
		t.Errorf("a dry run wrote:\nbefore %v\nafter  %v", before, after)
	}
	if !res.DryRun || res.Unchanged || res.Generation != 2 || res.Previous != 1 || res.Run != "" {
		t.Errorf("result = %+v, want a dry run of generation 2", res)
	}
	want := []NodeChange{
		{Name: "web-1", NodeID: f.reg.Enrolled("web-1").NodeID, Resources: 3,
			Added: []string{"package:curl"}, Changed: []string{"file:/etc/motd"}, Removed: []string{"package:nginx"}},
		{Name: "web-2", NodeID: f.reg.Enrolled("web-2").NodeID, Resources: 4,
			Added: []string{"file:/etc/hostname", "package:curl"}, Changed: []string{"file:/etc/motd"}, Removed: []string{"package:nginx"}},
		{Name: "web-3", NodeID: f.reg.Enrolled("web-3").NodeID, Resources: 3,
			Added: []string{"directory:/srv/www", "file:/etc/motd", "package:curl"}},
	}
	changes := takeChanges(res.Nodes)
	if !reflect.DeepEqual(res.Nodes, want) {
		t.Errorf("changes =\n%+v\nwant\n%+v", res.Nodes, want)
	}
	// How motd changes, shown as a diff of its old and new text, the same
	// change for both nodes.
	wantDiff := "--- file:/etc/motd (generation 1)\n+++ file:/etc/motd (generation 2)\n@@ -1 +1 @@\n-managed by muster\n+managed by muster, changed\n"
	for _, n := range []string{"web-1", "web-2"} {
		c := changes[n]
		if len(c) != 1 || c[0].ID != "file:/etc/motd" || len(c[0].Settings) != 0 || c[0].Content != wantDiff || c[0].Note != "" {
			t.Errorf("%s: changes %+v, want motd's diff %q", n, c, wantDiff)
		}
	}
	if changes["web-1"][0].Key != changes["web-2"][0].Key {
		t.Error("one change has two keys")
	}
	// A dry run of what stands says so.
	res = f.mustDeclare(f.parse(webSite+"\n[role.other]\nnodes = [\"web-3\"]\n", nil), Options{DryRun: true})
	if res.Unchanged {
		t.Error("web-3 is new: not unchanged")
	}
}

// The diff reads manifests in their first form too (a map per node).
func TestDiffAgainstFirstFormManifest(t *testing.T) {
	f := newFixture(t)
	id := f.enrol("web-1", nil)
	run := newRunID()
	resolved, _, _ := f.parse(webSite, nil).Resolve([]declaration.Node{{Name: "web-1"}})
	motd := resolved[0].Resources[1]
	man := generation.Manifest{Version: 1, Generation: 1, Run: run, DeclaredAt: t0, Nodes: []generation.ManifestNode{{
		Name: "web-1", NodeID: id.NodeID, Digest: "sha256:old",
		Resources: map[string]string{"file:/etc/motd": SpecDigest(motd), "package:gone": "sha256:x"},
	}}}
	data, err := bundle.SealTOML(man, generation.ManifestCtx(1, run), f.m.Pair.Sign, f.m.Pair.Age.Recipient())
	if err != nil {
		t.Fatal(err)
	}
	if err := f.m.Spool.Put(f.ctx, spool.ManifestName(1, run), data); err != nil {
		t.Fatal(err)
	}
	data, err = bundle.SignTOML(generation.Commit{Version: 1, Generation: 1, Run: run, DeclaredAt: t0}, generation.CommitCtx(1), f.m.Pair.Sign)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.m.Spool.Put(f.ctx, spool.CommitName(1), data); err != nil {
		t.Fatal(err)
	}
	res := f.mustDeclare(f.parse(webSite, nil), Options{DryRun: true})
	n := res.Nodes[0]
	if !slices.Equal(n.Added, []string{"directory:/srv/www", "package:nginx"}) || len(n.Changed) != 0 || !slices.Equal(n.Removed, []string{"package:gone"}) {
		t.Errorf("change = %+v", n)
	}
}

func TestRecoveryCopyTravelsWithTheDeclaration(t *testing.T) {
	f := newFixture(t)
	f.enrol("web-1", nil)
	f.enrol("web-2", nil)
	owned := []ledger.Entry{
		{ID: "file:/etc/old", Kind: resource.File, Path: "/etc/old", Digest: "sha256:1", Created: true},
		{ID: "package:telnet", Kind: resource.Package, Name: "telnet", Created: true},
	}
	f.mustDeclare(f.parse(webSite, nil), Options{Recovery: func(name string) (Recovery, bool) {
		if name == "web-1" {
			return Recovery{NodeID: "0123456789abcdef0123456789abcdef", Ledger: owned}, true
		}
		return Recovery{}, false
	}})
	nd := f.mustOpen("web-1", 1)
	if nd.RecoveryFrom != "0123456789abcdef0123456789abcdef" || !reflect.DeepEqual(nd.Recovery, owned) {
		t.Errorf("web-1's recovery copy = %s %+v", nd.RecoveryFrom, nd.Recovery)
	}
	if nd := f.mustOpen("web-2", 1); nd.RecoveryFrom != "" || nd.Recovery != nil {
		t.Errorf("web-2 has no recovery copy, got %s %+v", nd.RecoveryFrom, nd.Recovery)
	}
}

// A resource two roles declare differently for one node is refused
// before anything is written, with both places named.
func TestConflictRefusedBeforeWriting(t *testing.T) {
	f := newFixture(t)
	f.enrol("web-1", nil)
	d := f.parse(webSite+"\n[role.second]\nnodes = [\"web-1\"]\n\n[role.second.file.\"/etc/motd\"]\ncontent = \"other\\n\"\n", nil)
	before := files(t, f.dir)
	_, err := f.declare(d, Options{})
	var pe *ProblemsError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v, want a ProblemsError", err)
	}
	if len(pe.Problems) != 1 || !strings.Contains(pe.Problems[0].String(), "site.toml:5: role.web.file.\"/etc/motd\": node web-1: file:/etc/motd is declared differently by role web here and by role second at") ||
		!strings.HasSuffix(pe.Problems[0].String(), "site.toml:18") {
		t.Errorf("problems = %v", pe.Problems)
	}
	if after := files(t, f.dir); !slices.Equal(before, after) {
		t.Errorf("a refused declaration wrote:\nbefore %v\nafter  %v", before, after)
	}
}

// Content marked secret never appears in any result, in any form the
// command prints, nor in the manifest: only in the bundle sealed to the
// node that needs it.
func TestSecretNeverShown(t *testing.T) {
	const marker = "SECRET-4f1c9e-DO-NOT-PRINT"
	f := newFixture(t)
	f.enrol("web-1", nil)
	f.enrol("web-2", nil)
	src := webSite + "\n[role.web.file.\"/etc/token\"]\nsource = \"token\"\nsecret = true\nmode = \"0600\"\n"
	files := map[string]string{"token": marker + "\n"}
	check := func(what string, v any) {
		t.Helper()
		j, _ := json.Marshal(v)
		for _, s := range []string{string(j), fmt.Sprintf("%+v", v), fmt.Sprintf("%#v", v)} {
			if strings.Contains(s, marker) || strings.Contains(s, "DO-NOT-PRINT") {
				t.Errorf("%s shows the secret: %s", what, s)
			}
		}
	}
	res := f.mustDeclare(f.parse(src, files), Options{DryRun: true})
	check("dry run", res)
	res = f.mustDeclare(f.parse(src, files), Options{})
	check("declare", res)
	files["token"] = marker + " rotated\n"
	res = f.mustDeclare(f.parse(src, files), Options{DryRun: true})
	check("dry run of a changed secret", res)
	if !slices.Equal(res.Nodes[0].Changed, []string{"file:/etc/token"}) {
		t.Errorf("a changed secret shows as %+v, want file:/etc/token changed", res.Nodes[0])
	}
	man, err := ReadManifest(f.ctx, f.m, 1)
	if err != nil {
		t.Fatal(err)
	}
	check("the manifest", man)
	// A conflict over a secret names places, never content.
	_, err = f.declare(f.parse(src+"\n[role.x]\nnodes = [\"web-1\"]\n[role.x.file.\"/etc/token\"]\ncontent = \"other\"\nsecret = true\n", files), Options{})
	if err == nil {
		t.Fatal("conflict not refused")
	}
	check("the error", err.Error())
	check("the problems", err.(*ProblemsError).Problems)
	// The node it is for can read it.
	if nd := f.mustOpen("web-1", 1); !strings.Contains(nd.Resources[2].Content, marker) || !nd.Resources[2].Secret {
		t.Errorf("web-1's token = %+v", nd.Resources[2])
	}
}

func TestNodeDeclarationEncodingDecodesAsOne(t *testing.T) {
	tr, fa := true, false
	specs := []resource.Spec{
		{Kind: resource.File, Path: "/etc/a b/\"q\"", Content: "line\n\ttab \\ \"quote\" \x01 é 🙂\n", Secret: true, Mode: "0600", Owner: "root", Group: "0", Order: 5},
		{Kind: resource.File, Path: "/etc/gone", State: "absent"},
		{Kind: resource.Directory, Path: "/srv", Mode: "1777", SpecialBits: true, ReplaceSymlink: true},
		{Kind: resource.Symlink, Path: "/etc/l", Target: "/etc/a b"},
		{Kind: resource.Package, Name: "nginx", Version: "1.2-3"},
		{Kind: resource.Service, Name: "nginx.service", Enabled: &tr, Running: &fa, RestartOn: []string{"/etc/a b", "/srv"}, Order: -1},
	}
	recov := []ledger.Entry{{ID: "file:/x", Kind: resource.File, Path: "/x", Digest: "sha256:1", Created: true}, {ID: "package:p", Kind: resource.Package, Name: "p"}}
	want := generation.NodeDeclaration{
		Version: generation.FormatVersion, Generation: 7, Run: "0123456789abcdef", Node: "we\"b\\1\x01\x7fé\n", NodeID: "00ff",
		DeclaredAt: t0.Add(1500 * time.Millisecond), Prune: true, Resources: specs, Recovery: recov, RecoveryFrom: "ee11",
	}
	// Every field of NodeDeclaration is set above and written by
	// encodeDeclaration; a new field must be added to both.
	if n := reflect.TypeOf(want).NumField(); n != 10 {
		t.Fatalf("NodeDeclaration has %d fields, encodeDeclaration writes 10: update it and this test", n)
	}
	c := newEntryCache()
	// Twice, so that the second time every entry is found, not made.
	for i := range specs {
		if _, err := c.get(&specs[i]); err != nil {
			t.Fatal(err)
		}
	}
	np := nodePlan{id: &enrol.Identity{Name: want.Node, NodeID: "00ff"}}
	for i := range specs {
		e, err := c.get(&specs[i])
		if err != nil {
			t.Fatal(err)
		}
		np.entries = append(np.entries, e)
	}
	p := &plan{prune: true}
	var b bytes.Buffer
	// Node 0 owns the second entry too, so node 1 finds it encoded.
	rec := newRecoveries(2)
	rec.add(0, Recovery{NodeID: "dd00", Ledger: recov[1:]})
	rec.add(1, Recovery{NodeID: "ee11", Ledger: recov})
	p.encodeDeclaration(&b, &np, 7, "0123456789abcdef", want.DeclaredAt, rec, 1)
	var got generation.NodeDeclaration
	md, err := toml.Decode(b.String(), &got)
	if err != nil {
		t.Fatalf("decoding %s: %v", b.String(), err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		t.Errorf("undecoded keys %v", und)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decoded\n%+v\nwant\n%+v\nfrom\n%s", got, want, b.String())
	}
}

// A setting added to resource.Spec leaves the digest of a spec that does
// not use it as it was, so the first declare after an upgrade does not
// see every resource as changed and commit a generation for nothing.
func TestSpecDigestUnchangedByNewSettings(t *testing.T) {
	tr := true
	for _, c := range []struct {
		spec resource.Spec
		want string
	}{
		{resource.Spec{Kind: resource.File, Path: "/etc/motd", State: "present", Content: "hello\n", Mode: "0644", Owner: "root"},
			"sha256:5f8f0a507f16a0c8f87f4be7aa10c5361225d40c57c6f30805220c3e226b5bea"},
		{resource.Spec{Kind: resource.Service, Name: "a.service", Enabled: &tr, RestartOn: []string{"/etc/a"}},
			"sha256:02530ed27c4bacd13baa43adb642b10029e0d7a2e9d927bfa6dd892072ff49e9"},
	} {
		if got := SpecDigest(c.spec); got != c.want {
			t.Errorf("SpecDigest(%s) = %s, want %s as before", c.spec.ID(), got, c.want)
		}
	}
}

func TestSameSpecCoversSpec(t *testing.T) {
	// Two specs that differ in any one field are not the same, so they
	// never share an entry.
	typ := reflect.TypeOf(resource.Spec{})
	for i := range typ.NumField() {
		var s resource.Spec
		v := reflect.ValueOf(&s).Elem().Field(i)
		switch v.Kind() {
		case reflect.String:
			v.SetString("x")
		case reflect.Bool:
			v.SetBool(true)
		case reflect.Int:
			v.SetInt(1)
		case reflect.Pointer:
			v.Set(reflect.New(v.Type().Elem()))
		case reflect.Slice:
			v.Set(reflect.ValueOf([]string{"x"}))
		default:
			t.Fatalf("resource.Spec.%s: kind %s not covered by this test", typ.Field(i).Name, v.Kind())
		}
		if sameSpec(&s, &resource.Spec{}) || sameSpec(&resource.Spec{}, &s) {
			t.Errorf("resource.Spec.%s is not compared by sameSpec", typ.Field(i).Name)
		}
		c := s
		if !sameSpec(&s, &c) {
			t.Errorf("a copy of a spec with %s set is not the same", typ.Field(i).Name)
		}
	}
	tr, fa, tr2 := true, false, true
	tests := []struct {
		a, b resource.Spec
		same bool
	}{
		{resource.Spec{Enabled: &tr}, resource.Spec{Enabled: &tr2}, true},
		{resource.Spec{Enabled: &tr}, resource.Spec{Enabled: &fa}, false},
		{resource.Spec{Running: &fa}, resource.Spec{}, false},
		{resource.Spec{RestartOn: []string{"a", "b"}}, resource.Spec{RestartOn: []string{"a", "b"}}, true},
		{resource.Spec{RestartOn: []string{"a", "b"}}, resource.Spec{RestartOn: []string{"b", "a"}}, false},
	}
	for _, tt := range tests {
		if got := sameSpec(&tt.a, &tt.b); got != tt.same {
			t.Errorf("sameSpec(%+v, %+v) = %v", tt.a, tt.b, got)
		}
	}
}

func TestResourceSets(t *testing.T) {
	tests := []struct {
		pos  []int
		text string
	}{
		{nil, ""},
		{[]int{0}, "0"},
		{[]int{0, 1, 2, 5, 7, 8}, "0-2,5,7-8"},
		{[]int{3, 5, 7}, "3,5,7"},
		{[]int{10, 11, 12, 13}, "10-13"},
	}
	for _, tt := range tests {
		if got := formatSet(tt.pos); got != tt.text {
			t.Errorf("formatSet(%v) = %q, want %q", tt.pos, got, tt.text)
		}
		got, err := parseSet(tt.text, 20)
		if err != nil || !slices.Equal(got, tt.pos) {
			t.Errorf("parseSet(%q) = %v, %v; want %v", tt.text, got, err, tt.pos)
		}
	}
	for _, bad := range []string{"x", "1,0", "0-2,2", "3-1", "0-20", "20", "-1", "1,", ",1", "1--2", "0-1-2"} {
		if got, err := parseSet(bad, 20); err == nil {
			t.Errorf("parseSet(%q) = %v, want an error", bad, got)
		}
	}
}
