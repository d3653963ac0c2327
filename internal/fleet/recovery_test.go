package fleet

import (
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/internal/ledger"
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
