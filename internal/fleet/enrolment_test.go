package fleet

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/enrol"
	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/internal/host"
)

// TestWithRealEnrolment runs report against a registry computed from real
// enrolment records: a host joins with a token, is admitted, reports, and
// is then re-enrolled, which revokes its first identity.
func TestWithRealEnrolment(t *testing.T) {
	f := newFixture(t)
	join := func(reenrol bool, state string, at time.Time) *enrol.Identity {
		t.Helper()
		reg, err := enrol.LoadRegistry(f.ctx, f.m)
		if err != nil {
			t.Fatal(err)
		}
		tok, err := enrol.Issue(f.ctx, f.m, reg, enrol.IssueOptions{Name: "web", Reenrol: reenrol, Expires: time.Hour, Now: at})
		if err != nil {
			t.Fatal(err)
		}
		cfg := &host.Config{Spool: filepath.Join(f.dir, "spool"), Node: "web", State: filepath.Join(f.dir, state)}
		_, err = enrol.Join(f.ctx, enrol.JoinOptions{Token: tok.String(), Spool: cfg.Spool, Config: filepath.Join(f.dir, state+".toml"),
			State: cfg.State, Root: "/", Version: "test", Now: at.Add(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		res, reg, err := enrol.Admit(f.ctx, f.m, at.Add(2*time.Minute))
		if err != nil || len(res.Admitted) != 1 {
			t.Fatalf("admit: %+v, %v", res, err)
		}
		hid, err := host.LoadIdentity(cfg)
		if err != nil {
			t.Fatal(err)
		}
		f.reg = reg
		f.pairs[hid.NodeID()] = hid.Pair
		return reg.Identities[hid.NodeID()]
	}
	first := join(false, "state-1", t0)
	f.commit(1, t0.Add(time.Hour), &generation.Manifest{Nodes: []generation.ManifestNode{assign(first)}})
	f.reportOK(first, 1, 1, t0.Add(2*time.Hour))
	v := f.view(f.load(true), 0, Selection{})
	if n := find(v, "web"); n == nil || n.Status != Applied || n.LastContact.IsZero() {
		t.Fatalf("web: %+v, want applied", n)
	}

	second := join(true, "state-2", t0.Add(3*time.Hour))
	s := f.load(true)
	v = f.view(s, 0, Selection{})
	n := find(v, "web")
	if n.Status != Outstanding || n.NodeID != second.NodeID {
		t.Errorf("web after re-enrolment: %+v, want outstanding under its new identity", n)
	}
	if c := v.RefusedCounts(); c[RefusedRevoked] != 1 {
		t.Errorf("refused %+v, want the first identity's report", v.Refused)
	}
	rc, err := s.RecoveryCopies()
	if err != nil {
		t.Fatal(err)
	}
	if c := rc["web"]; c.NodeID != first.NodeID || c.Generation != 1 || len(c.Ledger) != 1 {
		t.Errorf("recovery copy %+v, want the first identity's", c)
	}
}
