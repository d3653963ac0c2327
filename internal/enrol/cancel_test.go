package enrol

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/spool"
)

var tCancel = t0.Add(90 * time.Second)

func (f *fixture) cancel(o CancelOptions) *CancelResult {
	f.t.Helper()
	if o.Now.IsZero() {
		o.Now = tCancel
	}
	res, err := Cancel(f.ctx, f.m, o)
	if err != nil {
		f.t.Fatalf("cancel %s: %v", o.Name, err)
	}
	return res
}

// A token cancelled after a host joined with it, but before the mesh
// admitted the request, admits nothing: the waiting request is refused
// with the cancellation as the reason, and the refusal is recorded.
func TestCancelledTokenIsNeverAdmitted(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tok := f.issue(IssueOptions{Name: "web-1"})
	j := f.join("a", tok, tJoin)
	res := f.cancel(CancelOptions{Name: "web-1", Reason: "stick lost in transit"})
	if len(res.Cancelled) != 1 || res.Cancelled[0].TokenID != tok.ID() || len(res.Spent) != 0 {
		t.Fatalf("cancel: %+v, want token %s cancelled", res, tok.ID())
	}
	ares, reg := f.admit(tAdmit)
	refusedOnly(t, ares, j.NodeID, "token cancelled at "+tCancel.Format(time.RFC3339)+": stick lost in transit")
	if reg.Enrolled("web-1") != nil || len(reg.Nodes) != 0 {
		t.Fatalf("web-1 enrolled with a cancelled token: %+v", reg.Nodes)
	}
	notAdmitted(t, f, j.NodeID)
	if f.registry().Refused[tok.ID()+"/"+j.NodeID] == nil {
		t.Error("the refusal was not recorded")
	}
	// A host joining later with the same token is refused too.
	k := f.join("b", tok, tAdmit.Add(time.Minute))
	ares, _ = f.admit(tAdmit.Add(2 * time.Minute))
	refusedOnly(t, ares, k.NodeID, "token cancelled")
	// Cancelling again changes nothing and says why.
	res = f.cancel(CancelOptions{Name: "web-1", Now: tAdmit.Add(3 * time.Minute)})
	if len(res.Cancelled) != 0 || len(res.Spent) != 1 || res.Spent[0].Admitted != nil || !strings.Contains(res.Spent[0].Reason, "token cancelled at "+tCancel.Format(time.RFC3339)) {
		t.Fatalf("second cancel: %+v", res)
	}
}

// A token that already admitted a host cannot be cancelled: Cancel names
// the identity, and the identity stays trusted until it is revoked.
func TestCancelUsedToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tok := f.issue(IssueOptions{Name: "web-1"})
	j := f.join("a", tok, tJoin)
	f.admit(tAdmit)
	res := f.cancel(CancelOptions{Name: "web-1", Now: tAdmit.Add(time.Minute)})
	if len(res.Cancelled) != 0 || len(res.Spent) != 1 {
		t.Fatalf("cancel: %+v, want the used token reported", res)
	}
	s := res.Spent[0]
	if s.Admitted == nil || s.Admitted.NodeID != j.NodeID || !strings.Contains(s.Reason, "token already used: it admitted web-1 as identity "+j.NodeID) {
		t.Fatalf("spent: %+v, want the admission of %s", s, j.NodeID)
	}
	if id := f.registry().Enrolled("web-1"); id == nil || id.NodeID != j.NodeID {
		t.Fatalf("web-1 is %+v after the refused cancel, want %s still trusted", id, j.NodeID)
	}
	// Once that identity is revoked, the used token is no alarm.
	tRevoke := tAdmit.Add(2 * time.Minute)
	if _, err := Revoke(f.ctx, f.m, f.registry(), "web-1", "decommissioned", tRevoke); err != nil {
		t.Fatal(err)
	}
	res = f.cancel(CancelOptions{Name: "web-1", Now: tRevoke.Add(time.Minute)})
	if len(res.Spent) != 1 || res.Spent[0].Admitted != nil || !strings.HasSuffix(res.Spent[0].Reason, "that identity was revoked at "+tRevoke.Format(time.RFC3339)) {
		t.Errorf("cancel after the revocation: %+v", res.Spent)
	}
}

// --token cancels one token of a node and leaves its others usable; an
// expired token is left as it is.
func TestCancelOneToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	lost := f.issue(IssueOptions{Name: "web-1"})
	kept := f.issue(IssueOptions{Name: "web-1", Now: t0.Add(time.Second)})
	short := f.issue(IssueOptions{Name: "web-1", Expires: time.Minute})
	res := f.cancel(CancelOptions{Name: "web-1", TokenID: lost.ID()})
	if len(res.Cancelled) != 1 || res.Cancelled[0].TokenID != lost.ID() || len(res.Spent) != 0 {
		t.Fatalf("cancel --token: %+v", res)
	}
	j := f.join("a", kept, tJoin)
	if ares, _ := f.admit(tAdmit); len(ares.Admitted) != 1 || ares.Admitted[0].NodeID != j.NodeID {
		t.Fatalf("the token not cancelled does not admit: %+v", ares)
	}
	// Without --token: the lost one is cancelled already, the kept one
	// admitted a host, the short one expired.
	res = f.cancel(CancelOptions{Name: "web-1", Now: tAdmit.Add(time.Minute)})
	if len(res.Cancelled) != 0 || len(res.Spent) != 3 {
		t.Fatalf("cancel: %+v, want three tokens left as they are", res)
	}
	want := map[string]string{lost.ID(): "token cancelled", kept.ID(): "token already used", short.ID(): "expired at"}
	for _, s := range res.Spent {
		if !strings.HasPrefix(s.Reason, want[s.Token.TokenID]) {
			t.Errorf("token %s: %q, want %q", s.Token.TokenID, s.Reason, want[s.Token.TokenID])
		}
	}
}

func TestCancelUnknownToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tok := f.issue(IssueOptions{Name: "web-1"})
	if _, err := Cancel(f.ctx, f.m, CancelOptions{Name: "web-2", Now: tCancel}); err == nil || !strings.Contains(err.Error(), "no token was ever issued for web-2") {
		t.Errorf("cancel web-2: %v", err)
	}
	_, err := Cancel(f.ctx, f.m, CancelOptions{Name: "web-2", TokenID: tok.ID(), Now: tCancel})
	if err == nil || fault.ClassOf(err) != fault.Usage || !strings.Contains(err.Error(), "token "+tok.ID()+" was issued for web-1, not web-2") {
		t.Errorf("cancel web-2 --token of web-1: %v", err)
	}
	if _, err := Cancel(f.ctx, f.m, CancelOptions{Name: "web-1", TokenID: strings.Repeat("0", 32), Now: tCancel}); err == nil || !strings.Contains(err.Error(), "no token "+strings.Repeat("0", 32)+" was issued") {
		t.Errorf("cancel an unknown id: %v", err)
	}
	// Nothing was written by the refused calls.
	if reg := f.registry(); len(reg.Admitted) != 0 {
		t.Errorf("refused cancels wrote %d records", len(reg.Admitted))
	}
}

// A cancel and an admit at the same moment: exactly one stands, and each
// says so. Run many times, each on a fresh token, so both orders happen.
func TestCancelRacesAdmit(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cancelled, admitted := 0, 0
	for i := range 12 {
		name := "web-" + string(rune('a'+i))
		tok := f.issue(IssueOptions{Name: name})
		data, fp := joinRequest(t, f.m, tok.ID(), name, tok, tJoin)
		f.put(spool.JoinName(tok.ID(), fp), data)
		var (
			wg   sync.WaitGroup
			cres *CancelResult
			ares *AdmitResult
			cerr error
			aerr error
		)
		wg.Add(2)
		go func() { defer wg.Done(); cres, cerr = Cancel(f.ctx, f.m, CancelOptions{Name: name, Now: tCancel}) }()
		go func() { defer wg.Done(); ares, _, aerr = Admit(f.ctx, f.m, tAdmit) }()
		wg.Wait()
		if cerr != nil || aerr != nil {
			t.Fatalf("%s: cancel %v, admit %v", name, cerr, aerr)
		}
		reg := f.registry()
		switch {
		case len(cres.Cancelled) == 1:
			cancelled++
			if reg.Enrolled(name) != nil || len(ares.Admitted) != 0 {
				t.Errorf("%s: cancelled, and admitted too: %+v", name, ares.Admitted)
			}
		case len(cres.Spent) == 1 && cres.Spent[0].Admitted != nil:
			admitted++
			if id := reg.Enrolled(name); id == nil || id.NodeID != fp || cres.Spent[0].Admitted.NodeID != fp {
				t.Errorf("%s: cancel says admitted %+v, registry has %+v", name, cres.Spent[0].Admitted, id)
			}
		default:
			t.Errorf("%s: cancel %+v, admit %+v", name, cres, ares)
		}
	}
	t.Logf("%d cancelled first, %d admitted first", cancelled, admitted)
}

// UnusedTokens lists exactly the tokens that could still admit a host: not
// the used one, not the cancelled one, not the expired one.
func TestUnusedTokens(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	used := f.issue(IssueOptions{Name: "web-1"})
	f.join("a", used, tJoin)
	f.admit(tAdmit)
	cancelled := f.issue(IssueOptions{Name: "web-2"})
	f.cancel(CancelOptions{Name: "web-2"})
	f.issue(IssueOptions{Name: "web-3", Expires: time.Minute})
	open2 := f.issue(IssueOptions{Name: "web-2", Now: t0.Add(time.Second)})
	reenrol := f.issue(IssueOptions{Name: "web-1", Reenrol: true, Now: tAdmit})
	out, err := UnusedTokens(f.ctx, f.m, f.registry(), tAdmit.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, is := range out {
		got = append(got, is.Name+" "+is.TokenID)
	}
	want := []string{"web-1 " + reenrol.ID(), "web-2 " + open2.ID()}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("unused %q, want %q (not %s, used, nor %s, cancelled)", got, want, used.ID(), cancelled.ID())
	}
	if !out[0].Reenrol {
		t.Error("the re-enrolment token is not marked as one")
	}
}

// --token takes the start of an id, as the tables show it, and refuses
// one that is the start of several ids or is not hex.
func TestCancelByIDPrefix(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	byFirst := map[byte]*Issued{}
	var shared string
	for i := 0; shared == ""; i++ {
		tok := f.issue(IssueOptions{Name: "web-1", Now: t0.Add(time.Duration(i) * time.Second)})
		if byFirst[tok.ID()[0]] != nil {
			shared = tok.ID()[:1]
		}
		byFirst[tok.ID()[0]] = &Issued{TokenID: tok.ID()}
	}
	_, err := Cancel(f.ctx, f.m, CancelOptions{Name: "web-1", TokenID: shared, Now: tCancel})
	if fault.ClassOf(err) != fault.Usage || !strings.Contains(err.Error(), "is the start of 2 token ids") {
		t.Errorf("cancel --token %s: %v, want it refused as the start of two ids", shared, err)
	}
	for _, bad := range []string{"XYZ", "web-1"} {
		if _, err := Cancel(f.ctx, f.m, CancelOptions{Name: "web-1", TokenID: bad, Now: tCancel}); fault.ClassOf(err) != fault.Usage {
			t.Errorf("cancel --token %q: %v, want a usage error", bad, err)
		}
	}
	one := byFirst[shared[0]].TokenID
	for c, is := range byFirst {
		if c != shared[0] {
			one = is.TokenID
			break
		}
	}
	res := f.cancel(CancelOptions{Name: "web-1", TokenID: one[:12]})
	if len(res.Cancelled) != 1 || res.Cancelled[0].TokenID != one {
		t.Errorf("cancel --token %s: %+v, want %s cancelled", one[:12], res, one)
	}
}
