package fleet

import (
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/generation"
)

// untold counts the refused reports from revoked identities that no run
// has said were refused yet.
func untold(v *View) (n int) {
	for _, o := range v.Refused {
		if o.Kind == RefusedRevoked && !o.Told {
			n++
		}
	}
	return n
}

// The story: a decommissioned host went on reporting for a while. report
// says each of its refused reports once, not on every run, however many
// runs there are; a report it sends later is news again, once.
func TestRevokedReportsToldOnce(t *testing.T) {
	f := newFixture(t)
	web := f.enrol("web-1", t0)
	db := f.enrol("db-1", t0)
	f.commit(1, t0.Add(time.Hour), &generation.Manifest{Nodes: []generation.ManifestNode{assign(web), assign(db)}})
	f.reportOK(web, 1, 1, t0.Add(2*time.Hour))
	f.reportOK(db, 1, 1, t0.Add(2*time.Hour))
	f.revoke(web, t0.Add(3*time.Hour), "host retired")
	f.reportOK(web, 1, 2, t0.Add(4*time.Hour))

	s := f.load(true)
	v := f.view(s, 0, Selection{})
	if n := untold(v); n != 2 {
		t.Fatalf("first run: %d untold of %+v, want web-1's 2 reports", n, v.Refused)
	}
	if w := s.Tell(v.Refused); len(w) != 0 {
		t.Fatalf("tell: %v", w)
	}

	// The next run, from the cache file: nothing new to say, though the
	// reports are still refused and listed.
	v = f.view(f.load(true), 0, Selection{})
	if n := untold(v); n != 0 || len(v.Refused) != 2 {
		t.Errorf("second run: %d untold of %d refused, want 0 of 2", n, len(v.Refused))
	}
	if c := v.RefusedCounts(); c[RefusedRevoked] != 2 {
		t.Errorf("counts %v: the reports are still refused", c)
	}

	// A report sent after that is said once.
	f.reportOK(web, 1, 3, t0.Add(5*time.Hour))
	s = f.load(true)
	v = f.view(s, 0, Selection{})
	if n := untold(v); n != 1 {
		t.Errorf("after a new report: %d untold, want 1", n)
	}
	s.Tell(v.Refused)
	if n := untold(f.view(f.load(true), 0, Selection{})); n != 0 {
		t.Errorf("and then: %d untold, want 0", n)
	}
	// db-1's report counts as ever.
	if n := find(v, "db-1"); n == nil || n.Status != Applied {
		t.Errorf("db-1: %+v, want applied", n)
	}
}
