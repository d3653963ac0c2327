package enrol

import (
	"strings"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/brief"
	"github.com/muster-tool/muster/internal/host"
)

// sendBriefing sends a briefing from host h at time now, as `muster brief
// --send` does, with the thresholds of its host config.
func (f *fixture) sendBriefing(h string, now time.Time) *brief.Briefing {
	f.t.Helper()
	cfg, id := f.identity(h)
	th := cfg.Brief.WithDefaults()
	b, err := SendBriefing(f.ctx, f.m.Spool, id, brief.Env{
		Node: cfg.Node, Root: f.root, State: cfg.State,
		MinFreeStateMB: th.MinFreeStateMB, MinFreeRootMB: th.MinFreeRootMB, Version: "test", Now: now,
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

// Re-enrolment revokes the previous identity at the moment of admission,
// in the same record that admits the new one; from then on the old
// identity's briefings are refused.
func TestReenrolmentRevokesPreviousIdentity(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.join("old", f.issue(IssueOptions{Name: "web-1"}), tJoin)
	_, reg := f.admit(tAdmit)
	old := reg.Enrolled("web-1")
	tReissue := tAdmit.Add(time.Hour)
	tok := f.issue(IssueOptions{Name: "web-1", Reenrol: true, Now: tReissue})
	j := f.join("new", tok, tReissue.Add(time.Minute))
	// Until admission, the old identity is trusted.
	if id := f.registry().Enrolled("web-1"); id == nil || id.NodeID != old.NodeID {
		t.Fatalf("before admission web-1 is %+v, want the old identity", id)
	}
	tReadmit := tReissue.Add(2 * time.Minute)
	res, reg := f.admit(tReadmit)
	if len(res.Admitted) != 1 || res.Admitted[0] != (Admitted{Name: "web-1", NodeID: j.NodeID, Replaces: old.NodeID}) {
		t.Fatalf("admit: %+v", res)
	}
	for _, r := range []*Registry{reg, f.registry()} {
		n := r.Nodes["web-1"]
		if n.Current.NodeID != j.NodeID || n.Current.Revoked() {
			t.Errorf("web-1's current identity is %+v, want the new one, trusted", n.Current)
		}
		if len(n.Past) != 1 || n.Past[0].NodeID != old.NodeID || !n.Past[0].RevokedAt.Equal(tReadmit) || n.Past[0].RevokeReason != "replaced by re-enrolment" {
			t.Errorf("web-1's past identities: %+v, want the old one revoked at %s", n.Past, tReadmit)
		}
		if len(r.Active()) != 1 {
			t.Errorf("%d active identities, want 1", len(r.Active()))
		}
	}
	// The old host does not know and keeps sending briefings: refused.
	f.sendBriefing("old", tReadmit.Add(time.Minute))
	f.sendBriefing("new", tReadmit.Add(time.Minute))
	briefs, refused, err := reg.Briefings(f.ctx, f.m)
	if err != nil {
		t.Fatal(err)
	}
	if briefs[old.NodeID] != nil || briefs[j.NodeID] == nil || !briefs[j.NodeID].Eligible() {
		t.Errorf("briefings: %v", briefs)
	}
	if len(refused) != 1 || !strings.Contains(refused[0], old.NodeID) || !strings.Contains(refused[0], "revoked at "+tReadmit.Format(time.RFC3339)) {
		t.Errorf("refused briefings: %q, want the old identity's", refused)
	}
	// A second re-enrolment token for the same identity is spent by
	// the first: the re-enrolment decision names what it replaces.
	tok2 := f.issue(IssueOptions{Name: "web-1", Reenrol: true, Now: tReadmit})
	k := f.join("third", tok2, tReadmit.Add(time.Minute))
	res, reg = f.admit(tReadmit.Add(2 * time.Minute))
	if len(res.Admitted) != 1 || res.Admitted[0].Replaces != j.NodeID || reg.Enrolled("web-1").NodeID != k.NodeID {
		t.Errorf("second re-enrolment: %+v", res)
	}
}

// Decommissioning revokes the identity; its briefings are refused, the
// node is listed with its revoked identity, and a plain token can enrol
// the name again.
func TestRevokeThenEnrolAgain(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.join("a", f.issue(IssueOptions{Name: "web-1"}), tJoin)
	_, reg := f.admit(tAdmit)
	tRevoke := tAdmit.Add(time.Hour)
	id, err := Revoke(f.ctx, f.m, reg, "web-1", "disk replaced", tRevoke)
	if err != nil || id.NodeID != a.NodeID {
		t.Fatalf("revoke: %+v, %v", id, err)
	}
	if _, err := Revoke(f.ctx, f.m, f.registry(), "web-1", "again", tRevoke); err == nil {
		t.Error("revoking a revoked identity succeeded")
	}
	if _, err := Revoke(f.ctx, f.m, f.registry(), "db-1", "", tRevoke); err == nil {
		t.Error("revoking a node never enrolled succeeded")
	}
	// The briefing it sent before it was revoked is no longer read, and
	// is no news.
	if briefs, refused, err := f.registry().Briefings(f.ctx, f.m); err != nil || len(briefs) != 0 || len(refused) != 0 {
		t.Errorf("briefings after the revocation: %v, refused %q, %v; want none", briefs, refused, err)
	}
	f.sendBriefing("a", tRevoke.Add(time.Minute))
	reg = f.registry()
	if reg.Enrolled("web-1") != nil || len(reg.Active()) != 0 {
		t.Fatal("a revoked identity is still trusted")
	}
	if got := reg.Identities[a.NodeID]; !got.RevokedAt.Equal(tRevoke) || got.RevokeReason != "disk replaced" {
		t.Errorf("revoked identity: %+v", got)
	}
	briefs, refused, err := reg.Briefings(f.ctx, f.m)
	if err != nil {
		t.Fatal(err)
	}
	if len(briefs) != 0 || len(refused) != 1 || !strings.Contains(refused[0], a.NodeID) {
		t.Errorf("briefings of a revoked identity: %v, refused %q", briefs, refused)
	}
	// The name is free again for a plain token (a re-enrolment has
	// nothing to replace).
	if _, err := f.tryIssue(IssueOptions{Name: "web-1", Reenrol: true, Now: tRevoke}); err == nil {
		t.Error("re-enrolment token issued for a decommissioned node")
	}
	tEnrol := tRevoke.Add(time.Hour)
	b := f.join("b", f.issue(IssueOptions{Name: "web-1", Now: tEnrol}), tEnrol.Add(time.Minute))
	res, reg := f.admit(tEnrol.Add(2 * time.Minute))
	if len(res.Admitted) != 1 || res.Admitted[0].Replaces != "" {
		t.Fatalf("admit after decommissioning: %+v", res)
	}
	for _, r := range []*Registry{reg, f.registry()} {
		n := r.Nodes["web-1"]
		if n.Current == nil || n.Current.NodeID != b.NodeID || n.Current.Revoked() {
			t.Fatalf("web-1 after enrolling again: current %+v", n.Current)
		}
		if len(n.Past) != 1 || n.Past[0].RevokeReason != "disk replaced" || !n.Past[0].RevokedAt.Equal(tRevoke) {
			t.Errorf("web-1's past: %+v, want the decommissioned identity with its own date and reason", n.Past)
		}
	}
}

// The registry is computed from the records alone: an admission that
// would take over a name trusted at its time, which it was not issued to
// replace, does not count, whatever order the records are read in.
func TestRegistryReplaysAdmissionsInOrder(t *testing.T) {
	id := func(node string) Admission {
		return Admission{NodeID: node, Name: "web-1", TokenID: "t-" + node}
	}
	at := func(a Admission, t time.Time, replaces string) *Admission {
		a.AdmittedAt, a.Replaces = t, replaces
		return &a
	}
	tests := []struct {
		name    string
		adm     []*Admission
		revoked map[string]time.Time
		current string
		past    []string
	}{
		{"plain tokens racing: the first stands",
			[]*Admission{at(id("b"), t0.Add(time.Second), ""), at(id("a"), t0, "")}, nil, "a", nil},
		{"re-enrolment replaces",
			[]*Admission{at(id("a"), t0, ""), at(id("b"), t0.Add(time.Hour), "a")}, nil, "b", []string{"a"}},
		{"two re-enrolments of one identity: the first stands",
			[]*Admission{at(id("a"), t0, ""), at(id("b"), t0.Add(time.Hour), "a"), at(id("c"), t0.Add(2*time.Hour), "a")}, nil, "b", []string{"a"}},
		{"plain token after decommissioning",
			[]*Admission{at(id("a"), t0, ""), at(id("b"), t0.Add(2*time.Hour), "")}, map[string]time.Time{"a": t0.Add(time.Hour)}, "b", []string{"a"}},
		{"plain token admitted before the decommissioning does not count",
			[]*Admission{at(id("a"), t0, ""), at(id("b"), t0.Add(time.Hour), "")}, map[string]time.Time{"a": t0.Add(2 * time.Hour)}, "a", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Registry{Admitted: map[string]*Admission{}, revocations: map[string]*Revocation{}}
			for _, a := range tt.adm {
				r.Admitted[a.TokenID] = a
			}
			for node, when := range tt.revoked {
				r.revocations[node] = &Revocation{NodeID: node, RevokedAt: when, Reason: "decommissioned"}
			}
			r.build()
			n := r.Nodes["web-1"]
			if n.Current.NodeID != tt.current {
				t.Errorf("current identity %s, want %s", n.Current.NodeID, tt.current)
			}
			var past []string
			for _, p := range n.Past {
				past = append(past, p.NodeID)
				if !p.Revoked() {
					t.Errorf("past identity %s is not revoked", p.NodeID)
				}
			}
			if strings.Join(past, ",") != strings.Join(tt.past, ",") {
				t.Errorf("past identities %v, want %v", past, tt.past)
			}
		})
	}
}

// A host config written ahead of enrolment keeps its settings: join fills
// in the rest.
func TestJoinKeepsConfigSettings(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	_, config := f.hostDirs("a")
	if err := host.WriteConfig(config, &host.Config{Brief: host.BriefConfig{MinFreeRootMB: 1 << 40}, Apt: host.AptConfig{Update: true}}); err != nil {
		t.Fatal(err)
	}
	j := f.join("a", f.issue(IssueOptions{Name: "web-1"}), tJoin)
	cfg, _ := f.identity("a")
	if cfg.Brief.MinFreeRootMB != 1<<40 || !cfg.Apt.Update || cfg.Node != "web-1" || cfg.Brief.MinFreeStateMB != host.DefaultMinFreeStateMB {
		t.Errorf("host config after join: %+v", cfg)
	}
	if j.Briefing.Eligible() {
		t.Error("a briefing below its free-root threshold is eligible")
	}
}

// Two re-enrolment tokens for one name, both joined before one admit: the
// older request is admitted first, and the newer one, decided in a later
// round, replaces it. Every reader must replay them in that order, whatever
// the order of their token ids, so the host admitted last is the one
// trusted and the one in between is revoked.
func TestTwoReenrolmentsInOneAdmit(t *testing.T) {
	t.Parallel()
	for _, newerFirstByID := range []bool{false, true} {
		f := newFixture(t)
		f.join("old", f.issue(IssueOptions{Name: "web-1"}), tJoin)
		_, reg := f.admit(tAdmit)
		old := reg.Enrolled("web-1")
		tReissue := tAdmit.Add(time.Hour)
		a := f.issue(IssueOptions{Name: "web-1", Reenrol: true, Now: tReissue})
		b := f.issue(IssueOptions{Name: "web-1", Reenrol: true, Now: tReissue})
		// first joins first; it is the token id order that varies.
		first, second := a, b
		if (a.ID() > b.ID()) != newerFirstByID {
			first, second = b, a
		}
		j1 := f.join("first", first, tReissue.Add(time.Minute))
		j2 := f.join("second", second, tReissue.Add(2*time.Minute))
		res, reg := f.admit(tReissue.Add(3 * time.Minute))
		want := []Admitted{{Name: "web-1", NodeID: j1.NodeID, Replaces: old.NodeID}, {Name: "web-1", NodeID: j2.NodeID, Replaces: j1.NodeID}}
		if len(res.Refused) != 0 || len(res.Admitted) != 2 || !(res.Admitted[0] == want[0] && res.Admitted[1] == want[1] || res.Admitted[0] == want[1] && res.Admitted[1] == want[0]) {
			t.Errorf("token ids descending %v: admit %+v, want %+v", newerFirstByID, res, want)
		}
		for _, r := range []*Registry{reg, f.registry()} {
			n := r.Nodes["web-1"]
			if n.Current.NodeID != j2.NodeID || n.Current.Revoked() || len(n.Past) != 2 || n.Past[1].NodeID != j1.NodeID || !n.Past[1].Revoked() {
				t.Errorf("token ids descending %v: web-1 is %+v, past %+v; want %s trusted, %s revoked", newerFirstByID, n.Current, n.Past, j2.NodeID, j1.NodeID)
			}
		}
	}
}
