package enrol

import (
	"bytes"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/brief"
	"github.com/muster-tool/muster/internal/testutil/fill"
	"github.com/muster-tool/muster/spool"
)

// Every field of a briefing, its lines and its facts survives the cache;
// a briefing without facts stays without; a cut cache never decodes.
func TestBriefingsCacheCoversEveryField(t *testing.T) {
	full := &brief.Briefing{}
	fill.Value(reflect.ValueOf(full).Elem())
	if full.Facts == nil || len(full.Lines) == 0 {
		t.Fatalf("fill left the facts or the lines empty: %+v", full)
	}
	bare := &brief.Briefing{}
	fill.Value(reflect.ValueOf(bare).Elem())
	bare.Facts = nil
	c := &briefingsCache{Spool: "dir:/srv/spool", Mesh: "ed25519:mesh", Briefings: map[string]cachedBriefing{
		"brief/a/1": {Size: 812, Briefing: full},
		"brief/b/2": {Size: -1, Briefing: bare},
	}}
	roundTrip(t, c, appendBriefingsCache, decodeBriefingsCache)
}

// The story: the mesh opens each node's briefing once. Later commands open
// only the briefings sent since, give exactly what opening them all would
// give, never use a cached briefing the spool no longer lists as its
// node's newest or of a node no longer trusted, and rebuild a cache that
// is damaged or another mesh's from the spool, with a warning.
func TestBriefingsCache(t *testing.T) {
	f := newFixture(t)
	nodes := f.enrolled("web-1", "web-2", "db-1")
	counter := &getCounter{Spool: f.m.Spool}
	f.m.Spool = counter
	briefings := func(how string, wantOpened int, warning string) map[string]*brief.Briefing {
		t.Helper()
		reg := f.registry()
		counter.take()
		briefs, warnings, err := reg.Briefings(f.ctx, f.m)
		if err != nil {
			t.Fatalf("%s: %v", how, err)
		}
		var opened []string
		for _, name := range counter.take() {
			if strings.HasPrefix(name, spool.BriefPrefix) {
				opened = append(opened, name)
			}
		}
		if len(opened) != wantOpened {
			t.Errorf("%s: opened %q, want %d briefings", how, opened, wantOpened)
		}
		if w := strings.Join(warnings, "\n"); warning == "" && w != "" || !strings.Contains(w, warning) {
			t.Errorf("%s: warnings %q, want %q", how, warnings, warning)
		}
		return briefs
	}
	// uncached is what opening every briefing of the n trusted nodes
	// gives.
	path := BriefingsCachePath(f.m.Dir, f.m.Spool.String())
	uncached := func(n int) map[string]*brief.Briefing {
		t.Helper()
		os.Remove(path)
		return briefings("without the cache", n, "")
	}
	want := uncached(3)
	if len(want) != 3 {
		t.Fatalf("briefings of %d nodes, want 3", len(want))
	}
	if got := briefings("with the cache", 0, ""); !reflect.DeepEqual(got, want) {
		t.Errorf("with the cache:\n%+v\nwant:\n%+v", got, want)
	}

	// A new briefing of web-1 is opened, and alone.
	later := t0.Add(2 * time.Hour)
	f.sendBriefing("web-1", later)
	got := briefings("web-1 briefed again", 1, "")
	if !got[nodes["web-1"]].Time.Equal(later) {
		t.Errorf("web-1's briefing is of %s, want the newest, of %s", got[nodes["web-1"]].Time, later)
	}
	want = uncached(3)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("after a new briefing, with the cache:\n%+v\nwithout:\n%+v", got, want)
	}
	briefings("rebuilt", 0, "")

	// The newest briefing gone from the spool, as in a spool restored
	// from an older copy: the one before it is opened and given, not the
	// cached one.
	newest := ""
	if err := counter.List(f.ctx, spool.BriefPrefix+nodes["web-1"]+"/", func(i spool.Info) error { newest = i.Name; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := counter.Delete(f.ctx, newest); err != nil {
		t.Fatal(err)
	}
	if got := briefings("the newest gone", 1, ""); got[nodes["web-1"]].Time.Equal(later) {
		t.Errorf("web-1's briefing is the one gone from the spool, of %s", later)
	}

	// A revoked node's cached briefing is not given.
	if _, err := Revoke(f.ctx, f.m, f.registry(), "db-1", "retired", later); err != nil {
		t.Fatal(err)
	}
	if got := briefings("db-1 revoked", 0, ""); got[nodes["db-1"]] != nil || len(got) != 2 {
		t.Errorf("after db-1's revocation: %d briefings, db-1's %+v; want web-1's and web-2's alone", len(got), got[nodes["db-1"]])
	}
	want = uncached(2)

	damageByte(t, path)
	if got := briefings("damaged", 2, "checksum does not match"); !reflect.DeepEqual(got, want) {
		t.Errorf("with a damaged cache:\n%+v\nwant:\n%+v", got, want)
	}
	briefings("rebuilt after damage", 0, "")

	// Another mesh's or another spool's, with this one's briefings.
	c, err := readBriefingsCache(path, f.m.Spool.String(), f.m.Public().Fingerprint())
	if err != nil || c == nil {
		t.Fatalf("the rebuilt cache does not read: %v", err)
	}
	for _, tc := range []struct{ spool, mesh, warning string }{
		{c.Spool, "ed25519:" + strings.Repeat("A", 43) + "=", "belongs to mesh"},
		{"dir:/elsewhere", c.Mesh, "belongs to spool"},
	} {
		if err := writeBriefingsCache(path, &briefingsCache{Spool: tc.spool, Mesh: tc.mesh, Briefings: c.Briefings}); err != nil {
			t.Fatal(err)
		}
		if got := briefings(tc.warning, 2, tc.warning); !reflect.DeepEqual(got, want) {
			t.Errorf("with a cache that %s:\n%+v\nwant:\n%+v", tc.warning, got, want)
		}
	}
	if names := slices.Sorted(maps.Keys(c.Briefings)); len(names) != 2 {
		t.Errorf("the cache holds %q, want web-1's and web-2's newest briefings alone", names)
	}
}

// TestBriefingOfOneNode: Briefing gives what Briefings gives for the node,
// listing that node's briefings alone; it uses the briefings cache and
// never writes it, since it saw one node's briefings, not the fleet's.
func TestBriefingOfOneNode(t *testing.T) {
	f := newFixture(t)
	nodes := f.enrolled("web-1", "web-2", "db-1")
	f.sendBriefing("web-1", t0.Add(2*time.Hour))
	counter := &getCounter{Spool: f.m.Spool}
	f.m.Spool = counter
	reg := f.registry()
	want, _, err := reg.Briefings(f.ctx, f.m)
	if err != nil {
		t.Fatal(err)
	}
	path := BriefingsCachePath(f.m.Dir, f.m.Spool.String())
	cached, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	briefing := func(name string) (*brief.Briefing, []string) {
		t.Helper()
		counter.take()
		counter.lists = nil
		b, _, err := reg.Briefing(f.ctx, f.m, nodes[name])
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if l := counter.lists; len(l) != 1 || l[0] != spool.BriefPrefix+nodes[name]+"/" {
			t.Errorf("%s: listed %q, want its own briefings alone", name, l)
		}
		return b, counter.take()
	}
	for name, id := range nodes {
		b, read := briefing(name)
		if !reflect.DeepEqual(b, want[id]) || b == nil {
			t.Errorf("%s: %+v, want %+v", name, b, want[id])
		}
		if len(read) != 0 {
			t.Errorf("%s: read %q, want its briefing from the cache", name, read)
		}
	}
	if now, err := os.ReadFile(path); err != nil || !bytes.Equal(now, cached) {
		t.Errorf("the briefings cache changed: %v", err)
	}

	// Without the cache, the node's newest briefing alone is opened,
	// and no cache of one node is written.
	os.Remove(path)
	b, read := briefing("web-1")
	if !reflect.DeepEqual(b, want[nodes["web-1"]]) || len(read) != 1 {
		t.Errorf("web-1 without the cache: %+v, read %q; want its newest briefing, opened alone", b, read)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("Briefing of one node wrote the briefings cache: %v", err)
	}
}
