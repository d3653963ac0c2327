package fleet

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/internal/ledger"
	"github.com/muster-tool/muster/spool"
)

func TestRecoveryCopies(t *testing.T) {
	f := newFixture(t)
	web := f.enrol("web", t0)
	host := f.enrol("rebuilt", t0)
	gone := f.enrol("gone", t0)
	f.commit(1, t0.Add(time.Hour), &generation.Manifest{Nodes: []generation.ManifestNode{assign(web), assign(host), assign(gone)}})
	f.commit(2, t0.Add(2*time.Hour), &generation.Manifest{Nodes: []generation.ManifestNode{assign(web), assign(host), assign(gone)}})

	// web: the newest report's ledger, even when that report failed; a
	// misfiled newer report does not count.
	r := f.report(web, 2, t0.Add(3*time.Hour), "service:nginx")
	r.Ledger = append(r.Ledger, ledger.Entry{ID: "package:nginx", Kind: "package", Name: "nginx", Created: true})
	f.write(web, 2, 1, r)
	f.reportOK(web, 1, 1, t0.Add(90*time.Minute))
	mis := f.report(web, 2, t0.Add(4*time.Hour))
	mis.NodeID = host.NodeID
	mis.Ledger = nil
	f.write(web, 2, 2, mis)

	// rebuilt: re-enrolled after generation 2; its new identity has not
	// reported yet, so the copy comes from the identity it replaced. That
	// identity's report of generation 3, declared after the revocation,
	// cannot be genuine and is not used.
	f.reportOK(host, 2, 1, t0.Add(150*time.Minute))
	f.enrol("rebuilt", t0.Add(5*time.Hour))
	f.commit(3, t0.Add(6*time.Hour), &generation.Manifest{Nodes: []generation.ManifestNode{assign(web)}})
	forged := f.report(host, 3, t0.Add(7*time.Hour))
	forged.Ledger = []ledger.Entry{{ID: "file:/etc/passwd", Kind: "file", Path: "/etc/passwd", Created: true}}
	f.write(host, 3, 1, forged)

	// gone: decommissioned; its copy stays available for a later
	// re-enrolment of the name.
	f.reportOK(gone, 2, 1, t0.Add(150*time.Minute))
	f.revoke(gone, t0.Add(5*time.Hour), "retired")

	check := func(s *State) {
		t.Helper()
		rc, err := s.RecoveryCopies()
		if err != nil {
			t.Fatal(err)
		}
		if c := rc["web"]; c.NodeID != web.NodeID || c.Generation != 2 || c.Seq != 1 || len(c.Ledger) != 2 || c.Ledger[1].ID != "package:nginx" {
			t.Errorf("web: %+v", c)
		}
		if c := rc["rebuilt"]; c.NodeID != host.NodeID || c.Generation != 2 || len(c.Ledger) != 1 || c.Ledger[0].ID != "file:/etc/motd" {
			t.Errorf("rebuilt: %+v, want the replaced identity's generation 2 ledger", c)
		}
		if c := rc["gone"]; c.NodeID != gone.NodeID || c.Generation != 2 {
			t.Errorf("gone: %+v", c)
		}
		if len(rc) != 3 {
			t.Errorf("%d copies, want 3", len(rc))
		}
	}
	check(f.load(false))
	check(f.load(true))
	f.sp.take()
	check(f.load(true))
	if got := f.sp.takeData(); len(got) != 0 {
		t.Errorf("recovery copies from the cache read %q", got)
	}

	// Once the new identity reports, its copy wins.
	newID := f.reg.Nodes["rebuilt"].Current
	r = f.report(newID, 3, t0.Add(8*time.Hour))
	r.Ledger = nil
	f.write(newID, 3, 1, r)
	rc, err := f.load(true).RecoveryCopies()
	if err != nil {
		t.Fatal(err)
	}
	if c := rc["rebuilt"]; c.NodeID != newID.NodeID || c.Generation != 3 || c.Ledger == nil || len(c.Ledger) != 0 {
		t.Errorf("rebuilt after its first report: %+v, want the new identity's empty ledger", c)
	}
}

// TestRecoveryCopiesWithoutBriefings: declare loads the reports alone for
// the recovery copies (Options.NoBriefings). Such a load neither lists nor
// reads a briefing, gives the copies a whole load gives, and leaves the
// cache's briefings as they were: the next whole load reads only the
// briefing that is new since.
func TestRecoveryCopiesWithoutBriefings(t *testing.T) {
	f := newFixture(t)
	web := f.enrol("web", t0)
	db := f.enrol("db", t0)
	f.commit(1, t0.Add(time.Hour), &generation.Manifest{Nodes: []generation.ManifestNode{assign(web), assign(db)}})
	f.reportOK(web, 1, 1, t0.Add(2*time.Hour))
	f.reportOK(db, 1, 1, t0.Add(2*time.Hour))
	f.brief(web, 1, t0.Add(30*time.Minute))
	f.brief(db, 1, t0.Add(30*time.Minute), "free-root")

	reportsOnly := func() *State {
		t.Helper()
		f.sp.take()
		f.sp.lists = nil
		s, err := Load(f.ctx, f.m, f.reg, Options{CacheDir: f.cacheDir(), NoBriefings: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range f.sp.lists {
			if p == spool.BriefPrefix {
				t.Errorf("a load without briefings listed %s", p)
			}
		}
		for _, name := range f.sp.take() {
			if strings.HasPrefix(name, spool.BriefPrefix) {
				t.Errorf("a load without briefings read %s", name)
			}
		}
		return s
	}
	copies := func(s *State) map[string]RecoveryCopy {
		t.Helper()
		rc, err := s.RecoveryCopies()
		if err != nil {
			t.Fatal(err)
		}
		return rc
	}

	want := copies(f.load(false))
	if len(want) != 2 {
		t.Fatalf("%d recovery copies, want 2", len(want))
	}
	if got := copies(reportsOnly()); !reflect.DeepEqual(got, want) {
		t.Errorf("recovery copies without briefings:\n%+v\nwant\n%+v", got, want)
	}

	// A whole load fills the cache with the briefings and the stamps of
	// their directories, settled; one without them keeps them, so the
	// whole load after it reads only what is new.
	time.Sleep(spool.StampSettle + 100*time.Millisecond)
	if s := f.load(true); s.Stats.BriefingsRead != 2 {
		t.Fatalf("first whole load read %d briefings, want 2", s.Stats.BriefingsRead)
	}
	f.brief(web, 2, t0.Add(3*time.Hour), "free-root")
	reportsOnly()
	s := f.load(true)
	if s.Stats.BriefingsRead != 1 || s.Stats.Briefings != 2 {
		t.Errorf("whole load after one without briefings read %d of %d briefings, want 1 of 2", s.Stats.BriefingsRead, s.Stats.Briefings)
	}
	// Of the directories, only web's briefings: the rest are as the
	// cache knew them.
	if s.Stats.DirsRead != 1 {
		t.Errorf("whole load after one without briefings read %d directories, want 1 (web's briefings)", s.Stats.DirsRead)
	}
	if n := find(f.view(s, 1, Selection{}), "web"); n == nil || !n.LastContact.Equal(t0.Add(3*time.Hour)) {
		t.Errorf("web: %+v, want its last contact at its new briefing", n)
	}
}
