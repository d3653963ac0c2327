package enrol

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/brief"
	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/outcome"
	"github.com/muster-tool/muster/spool"
)

// The briefings SupersededBriefings names are the older ones of nodes
// whose newest verified: removed, they change nothing Briefings gives,
// with the cache or without it. A node whose newest briefing does not
// verify keeps all of its (the one given is an older one), and so does a
// revoked identity.
func TestSupersededBriefings(t *testing.T) {
	f := newFixture(t)
	nodes := f.enrolled("web-1", "web-2", "db-1")
	names := func(node string) []string {
		t.Helper()
		var out []string
		if err := f.m.Spool.List(f.ctx, spool.BriefPrefix+nodes[node]+"/", func(i spool.Info) error {
			out = append(out, i.Name)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	for k := range 2 {
		f.sendBriefing("web-1", t0.Add(time.Duration(2+k)*time.Hour))
		f.sendBriefing("db-1", t0.Add(time.Duration(2+k)*time.Hour))
	}
	f.sendBriefing("web-2", t0.Add(2*time.Hour))
	// web-2's newest is signed by db-1's key: junk, skipped.
	_, other := f.identity("db-1")
	seq := uint64(t0.Add(3 * time.Hour).UnixNano())
	junk, err := bundle.SealTOML(brief.Briefing{Version: brief.FormatVersion, Node: "web-2", Time: t0.Add(3 * time.Hour), Muster: "test",
		Lines: []outcome.Line{{ID: "os", Status: outcome.OK}}}, BriefCtx(nodes["web-2"], seq), other.Pair.Sign, f.m.Pair.Age.Recipient())
	if err != nil {
		t.Fatal(err)
	}
	f.put(spool.BriefName(nodes["web-2"], seq), junk)
	if _, err := Revoke(f.ctx, f.m, f.registry(), "db-1", "retired", t0.Add(4*time.Hour)); err != nil {
		t.Fatal(err)
	}

	before, warnings, err := f.registry().Briefings(f.ctx, f.m)
	if err != nil {
		t.Fatal(err)
	}
	web1 := names("web-1")
	var want []Superseded
	for _, n := range web1[:len(web1)-1] {
		want = append(want, Superseded{Object: n, By: web1[len(web1)-1]})
	}
	slices.SortFunc(want, func(a, b Superseded) int { return strings.Compare(a.Object, b.Object) })
	gcb, same, err := f.registry().SupersededBriefings(f.ctx, f.m)
	got := gcb.Superseded
	if err != nil || !reflect.DeepEqual(same, warnings) {
		t.Fatalf("superseded: warnings %q, %v; want %q", same, err, warnings)
	}
	if len(want) != 2 || !reflect.DeepEqual(got, want) {
		t.Fatalf("superseded %+v\nwant %+v", got, want)
	}
	// Every node's names, the revoked one's too, as the spool lists them.
	for _, node := range []string{"web-1", "web-2", "db-1"} {
		if n := gcb.Names[nodes[node]]; !slices.Equal(n, names(node)) || len(n) == 0 {
			t.Errorf("%s's briefings are named %v, want %v", node, n, names(node))
		}
	}
	for _, s := range got {
		if err := f.m.Spool.Delete(f.ctx, s.Object); err != nil {
			t.Fatal(err)
		}
	}
	for _, cached := range []bool{true, false} {
		if !cached {
			if err := os.Remove(BriefingsCachePath(f.m.Dir, f.m.Spool.String())); err != nil {
				t.Fatal(err)
			}
		}
		after, again, err := f.registry().Briefings(f.ctx, f.m)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(after, before) || !reflect.DeepEqual(again, warnings) {
			t.Errorf("with the cache %v: after the superseded went\n%+v %q\nbefore\n%+v %q", cached, after, again, before, warnings)
		}
		if s, _, err := f.registry().SupersededBriefings(f.ctx, f.m); err != nil || len(s.Superseded) != 0 {
			t.Errorf("with the cache %v: superseded again %+v", cached, s.Superseded)
		}
	}
	if n := len(names("web-2")); n != 3 {
		t.Errorf("web-2 has %d briefings, want its 3 kept", n)
	}
	if n := len(names("db-1")); n != 3 {
		t.Errorf("db-1 (revoked) has %d briefings, want its 3 kept", n)
	}
}
