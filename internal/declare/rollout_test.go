package declare

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/internal/resource"
	"github.com/muster-tool/muster/spool"
)

const wavedSite = webSite + `
[rollout.wave.canary]
nodes = ["web-1"]
`

// motdSite is wavedSite with another motd: the change a staged rollout
// carries.
var motdSite = strings.Replace(wavedSite, "managed by muster", "managed by muster, version 2", 1)

// TestCanaryThenPromote walks a staged rollout: generation 1 for every
// node, generation 2 (a change) for the canary wave only, generation 3
// for every node again.
func TestCanaryThenPromote(t *testing.T) {
	f := newFixture(t)
	for _, n := range []string{"web-1", "web-2", "web-3"} {
		f.enrol(n, nil)
	}
	f.mustDeclare(f.parse(wavedSite, nil), Options{})

	d := f.parse(motdSite, nil)
	canary, err := d.Wave([]string{"canary"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res := f.mustDeclare(d, Options{Wave: canary})
	wantHeld := []Held{
		{Name: "web-2", NodeID: f.reg.Enrolled("web-2").NodeID, Generation: 1},
		{Name: "web-3", NodeID: f.reg.Enrolled("web-3").NodeID, Generation: 1},
	}
	if res.Generation != 2 || res.Wave != "canary" || len(res.Nodes) != 1 || res.Nodes[0].Name != "web-1" || !reflect.DeepEqual(res.Held, wantHeld) {
		t.Fatalf("canary: %+v, held %+v", res, res.Held)
	}
	if got := res.Nodes[0].Changed; !reflect.DeepEqual(got, []string{"file:/etc/motd"}) {
		t.Errorf("the canary's change: %q", got)
	}
	// Only the canary has a bundle: the held nodes' hosts keep applying
	// generation 1, the newest with a bundle for them.
	if got := nodeBundles(f.objects(), spool.DeclPrefix+"00000000000000000002/"); len(got) != 1 || !strings.HasSuffix(got[0], f.reg.Enrolled("web-1").NodeID) {
		t.Errorf("generation 2's bundles: %q", got)
	}
	man, err := ReadManifest(f.ctx, f.m, 2)
	if err != nil {
		t.Fatal(err)
	}
	wantMan := []generation.ManifestHeld{{Name: "web-2", NodeID: wantHeld[0].NodeID, Generation: 1}, {Name: "web-3", NodeID: wantHeld[1].NodeID, Generation: 1}}
	if man.Wave != "canary" || !reflect.DeepEqual(man.Held, wantMan) || len(man.Nodes) != 1 {
		t.Errorf("manifest of the canary generation: wave %q, held %+v, %d nodes", man.Wave, man.Held, len(man.Nodes))
	}

	// The same canary again is unchanged.
	if again := f.mustDeclare(d, Options{Wave: canary}); !again.Unchanged || again.Generation != 2 {
		t.Errorf("the same canary declared again: %+v", again)
	}

	// Promotion: the held nodes are compared with what they kept
	// (generation 1), the canary with generation 2.
	dry := f.mustDeclare(d, Options{DryRun: true})
	for _, n := range dry.Nodes {
		want := []string{"file:/etc/motd"}
		if n.Name == "web-1" {
			want = nil
		}
		if !reflect.DeepEqual(n.Changed, want) || len(n.Added)+len(n.Removed) != 0 {
			t.Errorf("promotion, %s: added %q changed %q removed %q, want changed %q", n.Name, n.Added, n.Changed, n.Removed, want)
		}
	}
	res = f.mustDeclare(d, Options{})
	if res.Generation != 3 || res.Wave != "" || len(res.Nodes) != 3 || len(res.Held) != 0 || res.Held == nil {
		t.Fatalf("promotion: %+v", res)
	}
	man, err = ReadManifest(f.ctx, f.m, 3)
	if err != nil {
		t.Fatal(err)
	}
	if man.Wave != "" || man.Held != nil || len(man.Nodes) != 3 {
		t.Errorf("manifest of the promotion: wave %q, held %+v, %d nodes", man.Wave, man.Held, len(man.Nodes))
	}
	for _, n := range []string{"web-1", "web-2", "web-3"} {
		nd := f.mustOpen(n, 3)
		for _, r := range nd.Resources {
			if r.Kind == resource.File && r.Content != "managed by muster, version 2\n" {
				t.Errorf("%s's motd in generation 3: %q", n, r.Content)
			}
		}
	}
}

// TestWaveKeepsEachNodesGeneration: a node held by two waves in a row
// keeps the generation it had, and one the previous wave gave a bundle
// keeps that one.
func TestWaveKeepsEachNodesGeneration(t *testing.T) {
	f := newFixture(t)
	for _, n := range []string{"web-1", "web-2", "web-3"} {
		f.enrol(n, nil)
	}
	f.mustDeclare(f.parse(wavedSite, nil), Options{})
	d := f.parse(motdSite, nil)
	canary, _ := d.Wave([]string{"canary"}, nil)
	f.mustDeclare(d, Options{Wave: canary})
	two, err := d.Wave(nil, []string{"web-2"})
	if err != nil {
		t.Fatal(err)
	}
	res := f.mustDeclare(f.parse(strings.Replace(motdSite, "version 2", "version 3", 1), nil), Options{Wave: two})
	got := map[string]uint64{}
	for _, h := range res.Held {
		got[h.Name] = h.Generation
	}
	if want := map[string]uint64{"web-1": 2, "web-3": 1}; res.Generation != 3 || !reflect.DeepEqual(got, want) {
		t.Errorf("generation %d held %v, want %v", res.Generation, got, want)
	}
	// A node enrolled since has no generation to keep.
	f.enrol("web-4", nil)
	res = f.mustDeclare(d, Options{Wave: canary})
	for _, h := range res.Held {
		if h.Name == "web-4" && h.Generation != 0 {
			t.Errorf("a new node is held on generation %d, want 0 (none)", h.Generation)
		}
	}
}

func TestWaveThatSelectsNoNodeIsRefused(t *testing.T) {
	f := newFixture(t)
	f.enrol("web-1", nil)
	f.enrol("db-1", nil)
	d := f.parse(wavedSite, nil)
	w, err := d.Wave(nil, []string{"db-*"}) // db-1 exists, but no role selects it
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.declare(d, Options{Wave: w})
	if err == nil || !strings.Contains(err.Error(), "wave db-* selects none of the 1 nodes the declaration gives a bundle to") {
		t.Fatalf("err = %v", err)
	}
	if gens := committed(f); len(gens) != 0 {
		t.Errorf("generations committed: %v", gens)
	}
	var pe *ProblemsError
	if errors.As(err, &pe) {
		t.Errorf("a wave that selects nothing is not a declaration problem: %v", err)
	}
}
