package enrol

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/keys"
	"github.com/muster-tool/muster/internal/token"
	"github.com/muster-tool/muster/internal/workpool"
	"github.com/muster-tool/muster/spool"
)

// racingDir is a directory spool on which another admit acts at a chosen
// moment: beforeJoins runs when admit lists the join requests, after it
// has read the registry and before it decides anything. It embeds the
// real spool, so spool.PutMany writes batches as it does on any directory
// spool; puts counts the records written one at a time instead.
type racingDir struct {
	*spool.Dir
	beforeJoins func()
	// beforeGet, if set, runs before each object is read.
	beforeGet func(name string)
	puts      atomic.Int32
}

func (d *racingDir) Get(ctx context.Context, name string, max int64) ([]byte, error) {
	if d.beforeGet != nil {
		d.beforeGet(name)
	}
	return d.Dir.Get(ctx, name, max)
}

func (d *racingDir) List(ctx context.Context, prefix string, fn func(spool.Info) error) error {
	if prefix == spool.EnrolJoinPrefix && d.beforeJoins != nil {
		d.beforeJoins()
	}
	return d.Dir.List(ctx, prefix, fn)
}

func (d *racingDir) ListDirs(ctx context.Context, prefix string, known func(string, spool.DirStamp) bool, fn func(spool.DirListing) error) error {
	if prefix == spool.EnrolJoinPrefix && d.beforeJoins != nil {
		d.beforeJoins()
	}
	return d.Dir.ListDirs(ctx, prefix, known, fn)
}

func (d *racingDir) Put(ctx context.Context, name string, data []byte) error {
	d.puts.Add(1)
	return d.Dir.Put(ctx, name, data)
}

// race puts a racingDir in front of f's spool.
func (f *fixture) race() *racingDir {
	d := &racingDir{Dir: f.m.Spool.(*spool.Dir)}
	f.m.Spool = d
	return d
}

// joinWith writes a join request of a new host for tok, made at time
// when, and returns the host's fingerprint and the request as decoded.
func (f *fixture) joinWith(tok *token.Token, name string, proof *token.Token, when time.Time) (string, *JoinRequest) {
	f.t.Helper()
	data, fp := joinRequest(f.t, f.m, tok.ID(), name, proof, when)
	f.put(spool.JoinName(tok.ID(), fp), data)
	req, err := decodeJoin(data, f.m, tok.ID(), fp)
	if err != nil {
		f.t.Fatal(err)
	}
	return fp, req
}

// admitElsewhere records the admission of req as another admit would.
func (f *fixture) admitElsewhere(sp *spool.Dir, req *JoinRequest, fp string, at time.Time) {
	f.t.Helper()
	adm := Admission{Version: recordVersion, TokenID: req.TokenID, Name: req.Name, NodeID: fp, Host: req.Host, AdmittedAt: at.UTC()}
	data, err := bundle.SealTOML(adm, admitCtx(req.TokenID), f.m.Pair.Sign, f.m.Pair.Age.Recipient())
	if err != nil {
		f.t.Fatal(err)
	}
	if err := sp.Put(f.ctx, spool.AdmitName(req.TokenID), data); err != nil {
		f.t.Fatal(err)
	}
}

// Another admit decides a request after this one listed it as pending,
// and spool gc removes the decided request before this admit reads it:
// this admit has nothing left to decide for it, and decides the rest.
func TestAdmitSkipsARequestGoneAfterListing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	pendingJoins(t, f, otherJoins)
	tok := f.issue(IssueOptions{Name: "web-1"})
	fp, req := f.joinWith(tok, "web-1", tok, tJoin)
	sp := f.race()
	var once sync.Once
	sp.beforeGet = func(name string) {
		if name != spool.JoinName(tok.ID(), fp) {
			return
		}
		once.Do(func() {
			f.admitElsewhere(sp.Dir, req, fp, tJoin.Add(time.Minute))
			if err := sp.Dir.Delete(f.ctx, name); err != nil {
				t.Error(err)
			}
		})
	}
	res, reg := f.admit(tAdmit)
	if len(res.Admitted) != otherJoins || len(res.Refused) != 0 {
		t.Fatalf("admitted %d, refused %+v; want the %d others admitted and none refused", len(res.Admitted), res.Refused, otherJoins)
	}
	if id := reg.Identities[fp]; id == nil || id.Name != "web-1" {
		t.Errorf("identity %s: %+v, want web-1 as the other admit admitted it", fp, id)
	}
}

// Pending requests besides the ones a test is about: enough to share a
// batch with them.
const otherJoins = 20

// Another admit records a token's admission while this one decides: the
// batch holding this admit's admission of that token meets it, the request
// it decided for is refused as spent, and every other admission in the
// batch still stands.
func TestAdmitLosesATokenInABatch(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	pendingJoins(t, f, otherJoins)
	tok := f.issue(IssueOptions{Name: "web-1"})
	fpA, _ := f.joinWith(tok, "web-1", tok, tJoin)
	fpB, reqB := f.joinWith(tok, "web-1", tok, tJoin.Add(time.Second))
	sp := f.race()
	sp.beforeJoins = func() { f.admitElsewhere(sp.Dir, reqB, fpB, tJoin.Add(time.Minute)) }
	res, reg := f.admit(tAdmit)
	if len(res.Admitted) != otherJoins || len(res.Refused) != 1 {
		t.Fatalf("admitted %d, refused %+v; want %d admitted and host %s refused", len(res.Admitted), res.Refused, otherJoins, fpA)
	}
	if r := res.Refused[0]; r.HostFP != fpA || !strings.Contains(r.Reason, "token already used: it admitted web-1 as identity "+fpB) {
		t.Errorf("refused %+v, want host %s refused: token already used by %s", r, fpA, fpB)
	}
	for _, a := range res.Admitted {
		if a.NodeID == fpA || a.NodeID == fpB {
			t.Errorf("admit reports %+v admitted", a)
		}
	}
	for _, r := range []*Registry{reg, f.registry()} {
		if id := r.Enrolled("web-1"); id == nil || id.NodeID != fpB {
			t.Errorf("web-1 is %+v, want host %s, admitted by the other admit", id, fpB)
		}
		if len(r.Active()) != otherJoins+1 {
			t.Errorf("%d active identities, want %d", len(r.Active()), otherJoins+1)
		}
		if r.Refused[tok.ID()+"/"+fpA] == nil || r.Refused[tok.ID()+"/"+fpB] != nil {
			t.Errorf("refusals recorded for web-1: %v, want host %s's only", r.Refused, fpA)
		}
	}
	notAdmitted(t, f, fpA)
	sp.beforeJoins = nil
	if res, _ := f.admit(tAdmit.Add(time.Minute)); len(res.Admitted)+len(res.Refused) != 0 {
		t.Errorf("admit again: %+v", res)
	}
}

// Another admit admits the very request this one decides for: there is
// nothing to say about it, and the token's later request is refused.
func TestAdmitFindsItsRequestAdmittedElsewhere(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tok := f.issue(IssueOptions{Name: "web-1"})
	fpA, reqA := f.joinWith(tok, "web-1", tok, tJoin)
	fpB, _ := f.joinWith(tok, "web-1", tok, tJoin.Add(time.Second))
	sp := f.race()
	sp.beforeJoins = func() { f.admitElsewhere(sp.Dir, reqA, fpA, tJoin.Add(time.Minute)) }
	res, reg := f.admit(tAdmit)
	refusedOnly(t, res, fpB, "token already used: it admitted web-1 as identity "+fpA)
	if id := reg.Enrolled("web-1"); id == nil || id.NodeID != fpA {
		t.Errorf("web-1 is %+v, want host %s", id, fpA)
	}
	if r := f.registry(); r.Refused[tok.ID()+"/"+fpA] != nil {
		t.Errorf("the admitted request is recorded as refused: %+v", r.Refused[tok.ID()+"/"+fpA])
	}
	notAdmitted(t, f, fpB)
}

// Admissions and refusals are written in batches, not one record at a
// time, and each is recorded once: a second admit finds nothing to decide.
func TestAdmitWritesInBatches(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	pendingJoins(t, f, otherJoins)
	other := f.issue(IssueOptions{Name: "db-1"})
	real := f.m.Spool
	f.m.Spool = unsyncedDir{real.(*spool.Dir)}
	reg := f.registry()
	forged := make([]string, otherJoins)
	err := workpool.Run(f.ctx, otherJoins, runtime.GOMAXPROCS(0), func(i int) error {
		name := fmt.Sprintf("web-%d", i)
		tok, err := Issue(f.ctx, f.m, reg, IssueOptions{Name: name, Expires: DefaultExpiry, Now: t0})
		if err != nil {
			return err
		}
		data, fp := joinRequest(t, f.m, tok.ID(), name, other, tJoin)
		forged[i] = fp
		return f.m.Spool.Put(f.ctx, spool.JoinName(tok.ID(), fp), data)
	})
	f.m.Spool = real
	if err != nil {
		t.Fatal(err)
	}
	sp := f.race()
	res, reg := f.admit(tAdmit)
	if len(res.Admitted) != otherJoins || len(res.Refused) != otherJoins {
		t.Fatalf("admitted %d, refused %d; want %d each", len(res.Admitted), len(res.Refused), otherJoins)
	}
	for _, r := range res.Refused {
		if !strings.Contains(r.Reason, "its proof was not made with token") {
			t.Errorf("refused %+v, want a forged proof", r)
		}
	}
	if n := sp.puts.Load(); n != 0 {
		t.Errorf("%d records written one at a time, want every one in a batch", n)
	}
	if n := count(t, f, spool.EnrolAdmitPrefix); n != otherJoins {
		t.Errorf("%d admission records, want %d", n, otherJoins)
	}
	if n := count(t, f, spool.EnrolRefusedPrefix); n != otherJoins {
		t.Errorf("%d refusal records, want %d", n, otherJoins)
	}
	// The registry admit returns holds the refusals it wrote, as one
	// read from the spool does.
	fresh := f.registry()
	if len(reg.Refused) != otherJoins || len(fresh.Refused) != otherJoins {
		t.Errorf("%d refusals in the registry admit returns, %d in the spool; want %d", len(reg.Refused), len(fresh.Refused), otherJoins)
	}
	for key, rf := range fresh.Refused {
		if got := reg.Refused[key]; got == nil || got.Reason != rf.Reason || !got.RefusedAt.Equal(rf.RefusedAt) || got.HostFP != rf.HostFP {
			t.Errorf("refusal %s: admit returns %+v, the spool holds %+v", key, got, rf)
		}
	}
	for _, fp := range forged[:3] {
		notAdmitted(t, f, fp)
	}
	if res, _ := f.admit(tAdmit.Add(time.Minute)); len(res.Admitted)+len(res.Refused) != 0 {
		t.Errorf("admit again: %+v", res)
	}
}

// Of two plain tokens for one name, the request that joined first is
// admitted, whichever token sorts first.
func TestOldestJoinTakesTheName(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	t1 := f.issue(IssueOptions{Name: "db-1"})
	t2 := f.issue(IssueOptions{Name: "db-1"})
	if t1.ID() < t2.ID() {
		t1, t2 = t2, t1
	}
	first, _ := f.joinWith(t1, "db-1", t1, tJoin)
	second, _ := f.joinWith(t2, "db-1", t2, tJoin.Add(time.Second))
	res, reg := f.admit(tAdmit)
	if len(res.Admitted) != 1 || res.Admitted[0].NodeID != first {
		t.Fatalf("admitted %+v, want host %s, which joined first", res.Admitted, first)
	}
	refusedOnly(t, &AdmitResult{Refused: res.Refused}, second, "a plain token can never take over an enrolled name")
	if id := reg.Enrolled("db-1"); id == nil || id.NodeID != first {
		t.Errorf("db-1 is %+v", id)
	}
	notAdmitted(t, f, second)
}

// One host's keys joining with two tokens: one admission, one refusal.
func TestOneIdentityTwoTokens(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	pair, err := keys.Generate()
	if err != nil {
		t.Fatal(err)
	}
	fp := pair.Public().Fingerprint()
	for i, name := range []string{"web-1", "db-1"} {
		tok := f.issue(IssueOptions{Name: name})
		req := JoinRequest{Version: recordVersion, TokenID: tok.ID(), Name: name, Host: pair.Public(), Time: tJoin.Add(time.Duration(i) * time.Second)}
		req.Proof = encodeSig(tok.ProofKey(), proofMessage(tok.ID(), name, req.Host))
		data, err := bundle.SealTOML(req, joinCtx(tok.ID(), fp), pair.Sign, f.m.Pair.Age.Recipient())
		if err != nil {
			t.Fatal(err)
		}
		f.put(spool.JoinName(tok.ID(), fp), data)
	}
	res, reg := f.admit(tAdmit)
	if len(res.Admitted) != 1 || res.Admitted[0].Name != "web-1" {
		t.Fatalf("admitted %+v, want web-1, which joined first", res.Admitted)
	}
	refusedOnly(t, &AdmitResult{Refused: res.Refused}, fp, "identity "+fp+" was admitted before")
	if reg.Enrolled("db-1") != nil || len(reg.Active()) != 1 {
		t.Errorf("active identities: %+v", reg.Active())
	}
}

// Several admits at once, two hosts per token: every token is admitted
// exactly once, to the host that joined first, and only the other host is
// recorded as refused.
func TestConcurrentAdmitsFirstJoinWins(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	type pair struct{ tid, first, second string }
	pairs := make([]pair, otherJoins)
	real := f.m.Spool
	f.m.Spool = unsyncedDir{real.(*spool.Dir)}
	reg := f.registry()
	err := workpool.Run(f.ctx, otherJoins, runtime.GOMAXPROCS(0), func(i int) error {
		name := fmt.Sprintf("node-%05d", i)
		tok, err := Issue(f.ctx, f.m, reg, IssueOptions{Name: name, Expires: DefaultExpiry, Now: t0})
		if err != nil {
			return err
		}
		pairs[i].tid = tok.ID()
		for h, fp := range []*string{&pairs[i].first, &pairs[i].second} {
			data, id := joinRequest(t, f.m, tok.ID(), name, tok, tJoin.Add(time.Duration(h)*time.Second))
			if err := f.m.Spool.Put(f.ctx, spool.JoinName(tok.ID(), id), data); err != nil {
				return err
			}
			*fp = id
		}
		return nil
	})
	f.m.Spool = real
	if err != nil {
		t.Fatal(err)
	}
	const admits = 3
	var wg sync.WaitGroup
	results := make([]*AdmitResult, admits)
	errs := make([]error, admits)
	for i := range admits {
		wg.Go(func() { results[i], _, errs[i] = Admit(f.ctx, f.m, tAdmit) })
	}
	wg.Wait()
	reported := map[string]int{}
	for i, res := range results {
		if errs[i] != nil {
			t.Fatalf("admit %d: %v", i, errs[i])
		}
		for _, a := range res.Admitted {
			reported[a.NodeID]++
		}
	}
	reg = f.registry()
	if len(reg.Admitted) != otherJoins || len(reg.Active()) != otherJoins {
		t.Fatalf("%d admission records, %d active identities; want %d each", len(reg.Admitted), len(reg.Active()), otherJoins)
	}
	for _, p := range pairs {
		if reg.Identities[p.first] == nil || reg.Identities[p.second] != nil {
			t.Errorf("token %s: want only the first host %s admitted", p.tid, p.first)
		}
		if reported[p.first] != 1 {
			t.Errorf("host %s reported admitted %d times, want once", p.first, reported[p.first])
		}
		if reg.Refused[p.tid+"/"+p.first] != nil || reg.Refused[p.tid+"/"+p.second] == nil {
			t.Errorf("token %s: want only the second host %s recorded as refused", p.tid, p.second)
		}
	}
}

// Decisions spread over several batches are all written, and an admission
// that meets another admit's record of its token, in the middle of a
// batch, learns which admission won while the rest of its batch is
// written.
func TestWriteDecisionsAcrossBatches(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	pair, err := keys.Generate()
	if err != nil {
		t.Fatal(err)
	}
	n := 2*admitBatch + 3
	ds := make([]*decision, n)
	for i := range ds {
		p := &pendingJoin{tokenID: fmt.Sprintf("%032x", i), hostFP: fmt.Sprintf("host%04d", i)}
		ds[i] = &decision{p: p}
		if i%2 == 0 {
			ds[i].adm = &Admission{Version: recordVersion, TokenID: p.tokenID, Name: fmt.Sprintf("node-%d", i), NodeID: p.hostFP, Host: pair.Public(), AdmittedAt: tAdmit}
		} else {
			ds[i].reason = "refused for the test"
		}
	}
	lost := ds[admitBatch+admitBatch/2]
	won := &JoinRequest{TokenID: lost.p.tokenID, Name: lost.adm.Name, Host: pair.Public()}
	f.admitElsewhere(f.m.Spool.(*spool.Dir), won, "other-host", tJoin)
	if err := writeDecisions(f.ctx, f.m, ds, tAdmit); err != nil {
		t.Fatal(err)
	}
	for i, d := range ds {
		switch {
		case d == lost:
			if d.other == nil || d.other.NodeID != "other-host" {
				t.Errorf("decision %d: the admission that won is %+v, want other-host's", i, d.other)
			}
		case d.other != nil:
			t.Errorf("decision %d: lost to %+v, which no other admit wrote", i, d.other)
		case d.adm == nil && d.refusal == nil:
			t.Errorf("decision %d: its refusal is taken as another admit's", i)
		}
	}
	reg := f.registry()
	if len(reg.Admitted) != (n+1)/2 || len(reg.Refused) != n/2 {
		t.Fatalf("%d admissions and %d refusals in the spool, want %d and %d", len(reg.Admitted), len(reg.Refused), (n+1)/2, n/2)
	}
	for _, d := range ds {
		if d.adm != nil && d != lost && reg.Admitted[d.p.tokenID].NodeID != d.p.hostFP {
			t.Errorf("token %s: admission %+v, want host %s", d.p.tokenID, reg.Admitted[d.p.tokenID], d.p.hostFP)
		}
	}
}
