package apply_test

import (
	"maps"
	"path/filepath"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/apply"
	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/internal/testutil/s3server"
	"github.com/muster-tool/muster/spool"
)

// requestsOf runs one apply of h with the spool seen through the counting
// proxy, listing pageSize keys per request, and returns what it sent to
// the store.
func (f *fixture) requestsOf(px *s3server.Proxy, h *testHost, pageSize int, now time.Time) (*apply.Result, map[string]int, []string) {
	f.t.Helper()
	cfg, err := spool.ParseS3Location(px.URL("mesh"))
	if err != nil {
		f.t.Fatal(err)
	}
	cfg.PageSize = pageSize
	sp, err := spool.OpenS3(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	px.Reset()
	res := f.mustApply(h, func(o *apply.Options) {
		o.Spool = sp
		o.Now = func() time.Time { return now }
	})
	return res, px.Count(), px.Requests()
}

// A host's apply that finds nothing new sends one request to an S3 store
// (the listing of commits from the one it applied on), however many
// generations, nodes and reports the spool holds; once per contact
// interval it sends its report as well, one PUT without a HEAD. What is
// new is fetched as before.
func TestNoOpApplyRequestsOnS3(t *testing.T) {
	srv := s3server.Start(t)
	srv.SetEnv(t)
	px := srv.Proxy(t)
	dir := t.TempDir()
	f := newFixtureAt(t, dir, srv.URL("mesh"))
	h := f.enrol("web-1")
	for _, n := range []string{"web-2", "web-3"} {
		f.enrol(n)
	}
	now := time.Now()
	want := func(step string, got map[string]int, seen []string, exp map[string]int) {
		t.Helper()
		if !maps.Equal(got, exp) {
			t.Errorf("%s: requests %v, want %v:\n%q", step, got, exp, seen)
		}
	}
	// Two keys a page: the spool's listings of many generations,
	// reports or nodes take many pages, so a count that grew with them
	// would show.
	const page = 2
	for g := range 6 {
		f.declare(everyNode + "[role.all.file.\"/etc/motd\"]\ncontent = \"" + string(rune('a'+g)) + "\\n\"\n")
		now = now.Add(time.Minute)
		res, got, seen := f.requestsOf(px, h, page, now)
		if res.Changed != 1 {
			t.Fatalf("generation %d: %d changed", res.Generation, res.Changed)
		}
		if g == 0 {
			continue // no state yet: the whole listing
		}
		// What is new: the listing from the commit applied on (two
		// commits, one page), the new commit and this node's
		// declaration of it (a GET each, no HEAD), and the report.
		want("a new generation", got, seen, map[string]int{s3server.KindList: 1, s3server.KindGet: 2, s3server.KindPut: 1})

		// Unchanged since: the report says so (its lines are no longer
		// "changed"), and nothing is read but the listing.
		now = now.Add(time.Minute)
		_, got, seen = f.requestsOf(px, h, page, now)
		want("the run after", got, seen, map[string]int{s3server.KindList: 1, s3server.KindPut: 1})

		// Nothing new at all: one listing, no report.
		now = now.Add(15 * time.Minute)
		res, got, seen = f.requestsOf(px, h, page, now)
		want("a no-op", got, seen, map[string]int{s3server.KindList: 1})
		if !res.Quiet || res.Sent || res.Unchanged != 1 {
			t.Errorf("a no-op: quiet %v, sent %v, %d unchanged", res.Quiet, res.Sent, res.Unchanged)
		}
	}
	// A contact interval after the last report sent, the same report
	// goes out again: the mesh's last contact stays honest.
	sent := len(f.reports(h))
	now = now.Add(time.Hour)
	res, got, seen := f.requestsOf(px, h, page, now)
	want("a no-op after the contact interval", got, seen, map[string]int{s3server.KindList: 1, s3server.KindPut: 1})
	if !res.Sent || res.Quiet || len(f.reports(h)) != sent+1 {
		t.Errorf("after the contact interval: sent %v, quiet %v, %d reports, want %d", res.Sent, res.Quiet, len(f.reports(h)), sent+1)
	}
}

// A spool restored from another copy holds other objects, with other
// ETags: a host that kept the tag of the commit it applied reads the
// commit again and refuses the fork, exactly as it does without the tag.
func TestForkRefusedThroughKeptETag(t *testing.T) {
	srv := s3server.Start(t)
	srv.SetEnv(t)
	px := srv.Proxy(t)
	f := newFixtureAt(t, t.TempDir(), srv.URL("mesh"))
	h := f.enrol("web-1")
	gen := f.declare(everyNode + "[role.all.file.\"/etc/motd\"]\ncontent = \"one\\n\"\n")
	now := time.Now()
	f.requestsOf(px, h, 1000, now)
	if _, got, seen := f.requestsOf(px, h, 1000, now.Add(time.Minute)); got[s3server.KindGet] != 0 {
		t.Fatalf("the kept tag did not spare the commit's GET: %q", seen)
	}

	// Another copy of the mesh's history: the same generation, declared
	// again, signed by the mesh.
	c, err := generation.ReadCommit(f.ctx, f.m.Spool, gen, f.meshKey())
	if err != nil {
		t.Fatal(err)
	}
	other := *c
	other.DeclaredAt = c.DeclaredAt.Add(time.Second)
	data, err := bundle.SignTOML(other, generation.CommitCtx(gen), f.m.Pair.Sign)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.m.Spool.Delete(f.ctx, spool.CommitName(gen)); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Spool.Put(f.ctx, spool.CommitName(gen), data); err != nil {
		t.Fatal(err)
	}
	_, err = f.apply(h)
	wantRefused(t, err, "fork refused", "generation 1")
}

// With contact_interval = "0s" every run sends its report, as before
// there was an interval; with the default, a run with nothing new sends
// none, and a run with something new always does.
func TestContactInterval(t *testing.T) {
	f := newFixture(t)
	h := f.enrol("web-1")
	f.declare(everyNode + "[role.all.file.\"/etc/motd\"]\ncontent = \"one\\n\"\n")
	f.mustApply(h)
	f.mustApply(h) // the first "unchanged" report
	every := func(o *apply.Options) { o.Config.Report.ContactInterval = "0s" }
	for range 2 {
		before := len(f.reports(h))
		if res := f.mustApply(h, every); !res.Sent || res.Quiet || len(f.reports(h)) != before+1 {
			t.Errorf("contact_interval 0s: sent %v, quiet %v", res.Sent, res.Quiet)
		}
	}
	before := len(f.reports(h))
	if res := f.mustApply(h); res.Sent || !res.Quiet || len(f.reports(h)) != before {
		t.Errorf("default interval, nothing new: sent %v, quiet %v", res.Sent, res.Quiet)
	}
	// Drift repaired is news.
	writeFile(t, filepath.Join(h.root, "etc/motd"), "changed by hand\n")
	if res := f.mustApply(h); !res.Sent || res.Changed != 1 || len(f.reports(h)) != before+1 {
		t.Errorf("drift repaired: sent %v, %d changed", res.Sent, res.Changed)
	}
}
