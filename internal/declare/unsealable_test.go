package declare

import (
	"slices"
	"strings"
	"testing"

	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/enrol"
	"github.com/muster-tool/muster/internal/keys"
	"github.com/muster-tool/muster/internal/testutil/badkeys"
	"github.com/muster-tool/muster/spool"
)

// admitDirectly writes an admission record for name with host keys pub,
// sealed by the mesh as an admit of an older muster, which did not vet
// keys, would have written it.
func (f *fixture) admitDirectly(tokenID, name string, pub keys.Public) string {
	f.t.Helper()
	nodeID := pub.Fingerprint()
	a := enrol.Admission{Version: 1, TokenID: tokenID, Name: name, NodeID: nodeID, Host: pub, AdmittedAt: t0}
	data, err := bundle.SealTOML(a, bundle.Context{Kind: "admission", Name: spool.AdmitName(tokenID)}, f.m.Pair.Sign, f.m.Pair.Age.Recipient())
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.m.Spool.Put(f.ctx, spool.AdmitName(tokenID), data); err != nil {
		f.t.Fatal(err)
	}
	f.briefs[nodeID] = passed(name)
	return nodeID
}

// A node an older muster admitted with an age key of low order is in the
// registry. declare names it, with the reason, in a dry run and in the
// run that commits; the other nodes get the generation; the manifest
// lists it as ineligible; and declaring the same again is unchanged.
func TestNodeThatCannotBeSealedToIsNamedAndTheOthersCommit(t *testing.T) {
	f := newFixture(t)
	for i, name := range []string{"web-1", "web-2"} {
		pair, err := keys.Generate()
		if err != nil {
			t.Fatal(err)
		}
		f.pairs[name] = pair
		f.admitDirectly(strings.Repeat(string(rune('a'+i)), 32), name, pair.Public())
	}
	other, _ := keys.Generate()
	bad := other.Public()
	bad.Age = badkeys.LowOrderAge[0]
	badID := f.admitDirectly(strings.Repeat("f", 32), "web-3", bad)
	reg, err := enrol.LoadRegistry(f.ctx, f.m)
	if err != nil {
		t.Fatal(err)
	}
	if reg.Enrolled("web-3") == nil {
		t.Fatal("test bug: web-3 is not in the registry")
	}
	f.reg = reg
	decl := f.parse(webSite, nil)

	check := func(what string, res *Result) {
		t.Helper()
		if len(res.Unsealable) != 1 || res.Unsealable[0].Name != "web-3" || res.Unsealable[0].NodeID != badID ||
			!strings.Contains(res.Unsealable[0].Reason, bad.Age) {
			t.Errorf("%s: unsealable %+v, want web-3 with a reason naming its age key", what, res.Unsealable)
		}
		var names []string
		for _, n := range res.Nodes {
			names = append(names, n.Name)
		}
		if !slices.Equal(names, []string{"web-1", "web-2"}) {
			t.Errorf("%s: nodes %v, want web-1 and web-2", what, names)
		}
	}
	dry := f.mustDeclare(decl, Options{DryRun: true})
	check("dry run", dry)
	res := f.mustDeclare(decl, Options{})
	check("declare", res)
	if res.Generation != 1 || res.Run == "" || f.commit(1).Run != res.Run {
		t.Fatalf("generation 1 not committed: %+v", res)
	}
	for _, n := range []string{"web-1", "web-2"} {
		f.mustOpen(n, 1)
	}
	decls := nodeBundles(f.objects(), spool.DeclPrefix)
	if len(decls) != 2 || slices.ContainsFunc(decls, func(s string) bool { return strings.HasSuffix(s, badID) }) {
		t.Errorf("bundles written: %v, want web-1's and web-2's", decls)
	}
	man, err := ReadManifest(f.ctx, f.m, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(man.Nodes) != 2 || !slices.Equal(man.Ineligible, []string{"web-3"}) {
		t.Errorf("manifest: %d nodes, ineligible %v; want 2 and [web-3]", len(man.Nodes), man.Ineligible)
	}
	again := f.mustDeclare(decl, Options{})
	if !again.Unchanged || again.Generation != 1 {
		t.Errorf("declaring the same again: %+v, want generation 1 unchanged", again)
	}
	check("unchanged", again)
}

// A node whose bundle fails to seal when it is written, past the check
// of new nodes (here the check is skipped by calling write directly), is
// dropped there: the others' bundles, the manifest and the commit are
// written without it, and the reason is kept for the result.
func TestSealingFailureDropsOnlyThatNode(t *testing.T) {
	f := newFixture(t)
	f.enrol("web-1", nil)
	other, _ := keys.Generate()
	bad := other.Public()
	bad.Age = badkeys.LowOrderAge[2]
	id := &enrol.Identity{NodeID: bad.Fingerprint(), Name: "web-2", Host: bad, AdmittedAt: t0}
	f.add(id)
	f.briefs[id.NodeID] = passed("web-2")
	f.enrol("web-3", nil)
	p, err := newPlan(f.ctx, f.reg, f.briefs, f.parse(webSite, nil))
	if err != nil {
		t.Fatal(err)
	}
	c, err := p.write(f.ctx, f.m, 1, nil, Options{Now: t0})
	if err != nil {
		t.Fatalf("write: %v", err)
	}
	if len(p.unsealable) != 1 || p.unsealable[0].Name != "web-2" || !strings.Contains(p.unsealable[0].Reason, bad.Age) {
		t.Errorf("unsealable %+v, want web-2 with the reason", p.unsealable)
	}
	if f.commit(1).Run != c.Run {
		t.Fatal("generation 1 not committed")
	}
	f.mustOpen("web-1", 1)
	f.mustOpen("web-3", 1)
	man, err := ReadManifest(f.ctx, f.m, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(man.Nodes) != 2 || !slices.Equal(man.Ineligible, []string{"web-2"}) {
		t.Errorf("manifest: nodes %+v, ineligible %v", man.Nodes, man.Ineligible)
	}
	res := &Result{Nodes: []NodeChange{{Name: "web-1", NodeID: f.reg.Enrolled("web-1").NodeID}, {Name: "web-2", NodeID: id.NodeID}}}
	res.dropUnsealable(p.unsealable)
	if len(res.Nodes) != 1 || res.Nodes[0].Name != "web-1" || len(res.Unsealable) != 1 {
		t.Errorf("result %+v", res)
	}
}
