package enrol

import (
	"strings"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/brief"
	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/keys"
	"github.com/muster-tool/muster/internal/outcome"
	"github.com/muster-tool/muster/internal/token"
	"github.com/muster-tool/muster/spool"
)

// The story: someone who can write to a shared spool drops enrolment
// records signed by another key — an admission, a revocation, a refusal, a
// token record. None may stop the mesh's commands or be trusted: they are
// skipped and named, and admission goes on. A token whose record is junk
// counts as never issued.
func TestJunkEnrolmentRecordsSkipped(t *testing.T) {
	f := newFixture(t)
	tok := f.issue(IssueOptions{Name: "web-1", Expires: time.Hour, Now: t0})
	f.join("web-1", tok, t0)
	_, reg := f.admit(t0)
	good := reg.Enrolled("web-1")
	if good == nil {
		t.Fatal("web-1 not admitted")
	}

	rogue, err := keys.Generate()
	if err != nil {
		t.Fatal(err)
	}
	seal := func(v any, c bundle.Context) []byte {
		t.Helper()
		// Sealed to the mesh, as real records are, but signed by the
		// rogue key.
		data, err := bundle.SealTOML(v, c, rogue.Sign, f.m.Pair.Age.Recipient())
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	forgedAdmit := Admission{Version: recordVersion, TokenID: "0123456789abcdef0123456789abcdef", Name: "intruder",
		NodeID: rogue.Public().Fingerprint(), Host: rogue.Public(), AdmittedAt: t0}
	f.put(spool.AdmitName(forgedAdmit.TokenID), seal(forgedAdmit, admitCtx(forgedAdmit.TokenID)))
	f.put(spool.RevokeName(good.NodeID), seal(Revocation{Version: recordVersion, NodeID: good.NodeID, RevokedAt: t0, Reason: "forged"}, revokeCtx(good.NodeID)))
	f.put(spool.AdmitName("fedcba9876543210fedcba9876543210"), []byte("not a bundle at all\n"))

	// A host joins with a token this mesh never issued, whose record
	// someone able to write to the spool forged.
	tok2, err := token.New("web-2", f.m.Public().Fingerprint(), t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	name := spool.TokenName(tok2.ID())
	f.put(name, seal(Issued{Version: recordVersion, TokenID: tok2.ID(), Name: "web-2", Expires: t0.Add(time.Hour)}, tokenCtx(tok2.ID())))
	f.join("web-2", tok2, t0)

	res, reg := f.admit(t0.Add(time.Minute))
	if reg.Enrolled("intruder") != nil {
		t.Error("a forged admission was trusted")
	}
	if id := reg.Enrolled("web-1"); id == nil || id.NodeID != good.NodeID {
		t.Error("a forged revocation was trusted")
	}
	if reg.Enrolled("web-2") != nil || len(res.Admitted) != 0 {
		t.Errorf("web-2 was admitted with a token whose record is junk: %+v", res.Admitted)
	}
	if len(res.Refused) != 1 || !strings.Contains(res.Refused[0].String(), "web-2") {
		t.Errorf("refused %v, want web-2's join", res.Refused)
	}
	all := strings.Join(reg.Skipped, "\n")
	for _, n := range []string{spool.AdmitName(forgedAdmit.TokenID), spool.RevokeName(good.NodeID), spool.AdmitName("fedcba9876543210fedcba9876543210"), name} {
		if !strings.Contains(all, n+" skipped") {
			t.Errorf("skipped %q does not name %s", all, n)
		}
	}
	// A briefing signed by another key, newer than web-1's own, does not
	// make web-1 ineligible.
	seq := uint64(t0.Add(time.Hour).UnixNano())
	forged := brief.Briefing{Version: brief.FormatVersion, Node: "web-1", Time: t0.Add(time.Hour),
		Lines: []outcome.Line{{ID: "free-root", Status: outcome.Failed, Detail: "forged"}}}
	data, err := bundle.SealTOML(forged, BriefCtx(good.NodeID, seq), rogue.Sign, f.m.Pair.Age.Recipient())
	if err != nil {
		t.Fatal(err)
	}
	f.put(spool.BriefName(good.NodeID, seq), data)
	briefs, refused, err := reg.Briefings(f.ctx, f.m)
	if err != nil {
		t.Fatal(err)
	}
	if b := briefs[good.NodeID]; b == nil || !b.Eligible() {
		t.Errorf("web-1's briefing %+v: a forged briefing made it ineligible", b)
	}
	if len(refused) != 1 || !strings.Contains(refused[0], spool.BriefName(good.NodeID, seq)) {
		t.Errorf("refused %q, want the forged briefing named", refused)
	}

	// Nothing was deleted.
	if _, err := f.m.Spool.Stat(f.ctx, spool.AdmitName(forgedAdmit.TokenID)); err != nil {
		t.Errorf("junk deleted: %v", err)
	}
}
