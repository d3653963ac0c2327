package enrol

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/keys"
	"github.com/muster-tool/muster/internal/token"
	"github.com/muster-tool/muster/spool"
)

// The clock of a typical enrolment: issued at t0, joined a minute later,
// admitted a minute after that.
var (
	tJoin  = t0.Add(time.Minute)
	tAdmit = t0.Add(2 * time.Minute)
)

func TestJoinAndAdmit(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tok := f.issue(IssueOptions{Name: "web-1", Labels: map[string]string{"role": "web"}})
	j := f.join("a", tok, tJoin)
	if j.Name != "web-1" || !j.Briefing.Eligible() {
		t.Fatalf("join: %+v, briefing %+v", j, j.Briefing)
	}
	// Nothing is trusted before admission.
	if reg := f.registry(); reg.Enrolled("web-1") != nil {
		t.Fatal("web-1 is enrolled before admission")
	}
	res, reg := f.admit(tAdmit)
	if len(res.Admitted) != 1 || len(res.Refused) != 0 || res.Admitted[0] != (Admitted{Name: "web-1", NodeID: j.NodeID}) {
		t.Fatalf("admit: %+v", res)
	}
	for _, r := range []*Registry{reg, f.registry()} {
		id := r.Enrolled("web-1")
		if id == nil || id.NodeID != j.NodeID || id.Labels["role"] != "web" || !id.AdmittedAt.Equal(tAdmit) || id.TokenID != tok.ID() {
			t.Fatalf("registry: web-1 is %+v", id)
		}
		_, hostID := f.identity("a")
		if id.Host != hostID.Pair.Public() {
			t.Errorf("admitted host keys %v, the host holds %v", id.Host, hostID.Pair.Public())
		}
	}
	// Admitting again decides nothing new.
	if res, _ := f.admit(tAdmit.Add(time.Minute)); len(res.Admitted)+len(res.Refused) != 0 {
		t.Errorf("second admit: %+v", res)
	}
}

// The mesh keeps the token's verifier, never the token: no record in the
// spool holds its secret or its proof key, in any encoding.
func TestSpoolNeverHoldsTheToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tok := f.issue(IssueOptions{Name: "web-1"})
	f.join("a", tok, tJoin)
	f.admit(tAdmit)
	seed := tok.ProofKey().Seed()
	secrets := []string{
		strings.TrimPrefix(tok.String(), token.Prefix),
		hex.EncodeToString(tok.Secret[:]), base64.StdEncoding.EncodeToString(tok.Secret[:]), base64.RawURLEncoding.EncodeToString(tok.Secret[:]),
		hex.EncodeToString(seed), base64.StdEncoding.EncodeToString(seed), base64.RawURLEncoding.EncodeToString(seed),
	}
	n := 0
	err := f.m.Spool.List(f.ctx, "enrol/", func(i spool.Info) error {
		data, err := f.m.Spool.Get(f.ctx, i.Name, 0)
		if err != nil {
			return err
		}
		// Every enrolment record is sealed to the mesh: read it as the
		// mesh can.
		plain, _, err := bundle.OpenFrom(data, contextOf(t, i.Name), f.m.Pair.Age)
		if err != nil {
			return err
		}
		n++
		for _, s := range secrets {
			if bytes.Contains(plain, []byte(s)) || bytes.Contains(data, []byte(s)) {
				t.Errorf("object %s holds the token's secret", i.Name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Errorf("read %d enrolment records, want the token, join request and admission", n)
	}
	var is Issued
	data, err := f.m.Spool.Get(f.ctx, spool.TokenName(tok.ID()), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := bundle.OpenTOML(data, tokenCtx(tok.ID()), f.m.Pair.Age, f.m.Pair.Sign.Public().(ed25519.PublicKey), &is); err != nil {
		t.Fatal(err)
	}
	if is.Verifier != encodeKey(tok.Verifier()) || token.IDOf(tok.Verifier()) != tok.ID() {
		t.Errorf("token record keeps verifier %s, want the proof key's public half", is.Verifier)
	}
}

// contextOf returns the bundle context of an enrolment record by its name.
func contextOf(t *testing.T, name string) bundle.Context {
	rest := strings.TrimPrefix(name, "enrol/")
	kind, rest, _ := strings.Cut(rest, "/")
	a, b, _ := strings.Cut(rest, "/")
	switch kind {
	case "token":
		return tokenCtx(a)
	case "join":
		return joinCtx(a, b)
	case "admit":
		return admitCtx(a)
	case "revoke":
		return revokeCtx(a)
	case "refused":
		return refusedCtx(a, b)
	}
	t.Fatalf("unexpected object %s", name)
	return bundle.Context{}
}

// notAdmitted checks that nothing of host fingerprint fp was admitted:
// no identity in the registry, no admission record naming it.
func notAdmitted(t *testing.T, f *fixture, fp string) {
	t.Helper()
	reg := f.registry()
	if reg.Identities[fp] != nil {
		t.Errorf("refused host %s has an identity: %+v", fp, reg.Identities[fp])
	}
	for tid, a := range reg.Admitted {
		if a.NodeID == fp {
			t.Errorf("admission %s names refused host %s", tid, fp)
		}
	}
}

// refusedOnly checks that an admit refused exactly one request, of host fp,
// with a reason containing want, and admitted nothing.
func refusedOnly(t *testing.T, res *AdmitResult, fp, want string) {
	t.Helper()
	if len(res.Admitted) != 0 || len(res.Refused) != 1 {
		t.Fatalf("admit: %+v, want one refusal", res)
	}
	if r := res.Refused[0]; r.HostFP != fp || !strings.Contains(r.Reason, want) {
		t.Fatalf("refused %+v, want host %s refused with %q", r, fp, want)
	}
}

func TestTokenUsedTwice(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tok := f.issue(IssueOptions{Name: "web-1"})
	a := f.join("a", tok, tJoin)
	f.admit(tAdmit)
	// The same token carried to a second host after admission.
	b := f.join("b", tok, tAdmit.Add(time.Minute))
	res, reg := f.admit(tAdmit.Add(2 * time.Minute))
	refusedOnly(t, res, b.NodeID, "token already used")
	if id := reg.Enrolled("web-1"); id == nil || id.NodeID != a.NodeID {
		t.Errorf("web-1 is %+v, want the first host", id)
	}
	notAdmitted(t, f, b.NodeID)
	// The refusal is recorded: the request is decided once.
	if res, _ := f.admit(tAdmit.Add(3 * time.Minute)); len(res.Refused)+len(res.Admitted) != 0 {
		t.Errorf("the refused request was decided again: %+v", res)
	}
}

// Two hosts join with one token before the mesh admits: exactly one, the
// first to join, is admitted.
func TestTwoJoinsRaceForOneToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tok := f.issue(IssueOptions{Name: "web-1"})
	a := f.join("a", tok, tJoin)
	b := f.join("b", tok, tJoin.Add(time.Second))
	res, reg := f.admit(tAdmit)
	if len(res.Admitted) != 1 || res.Admitted[0].NodeID != a.NodeID {
		t.Fatalf("admitted %+v, want only the first host %s", res.Admitted, a.NodeID)
	}
	refusedOnly(t, &AdmitResult{Refused: res.Refused}, b.NodeID, "token already used")
	if len(reg.Active()) != 1 {
		t.Errorf("%d active identities, want 1", len(reg.Active()))
	}
	notAdmitted(t, f, b.NodeID)
}

// Several admits at once over the same pending requests, two hosts per
// token: every token is admitted exactly once, and no admitted request is
// recorded as refused.
func TestConcurrentAdmits(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const tokens = 6
	var fps [][2]string
	for i := range tokens {
		name := "node-" + string(rune('a'+i))
		tok := f.issue(IssueOptions{Name: name})
		var pair [2]string
		for h := range 2 {
			data, fp := joinRequest(t, f.m, tok.ID(), name, tok, tJoin.Add(time.Duration(h)*time.Second))
			f.put(spool.JoinName(tok.ID(), fp), data)
			pair[h] = fp
		}
		fps = append(fps, pair)
	}
	var wg sync.WaitGroup
	results := make([]*AdmitResult, 3)
	errs := make([]error, 3)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], _, errs[i] = Admit(f.ctx, f.m, tAdmit)
		}()
	}
	wg.Wait()
	admitted := map[string]int{}
	for i, res := range results {
		if errs[i] != nil {
			t.Fatalf("admit %d: %v", i, errs[i])
		}
		for _, a := range res.Admitted {
			admitted[a.NodeID]++
		}
	}
	reg := f.registry()
	if len(reg.Admitted) != tokens || len(reg.Active()) != tokens {
		t.Fatalf("%d admission records, %d active identities; want %d each", len(reg.Admitted), len(reg.Active()), tokens)
	}
	for _, pair := range fps {
		in := 0
		for _, fp := range pair {
			if reg.Identities[fp] != nil {
				in++
				if admitted[fp] != 1 {
					t.Errorf("host %s reported admitted %d times", fp, admitted[fp])
				}
			}
		}
		if in != 1 {
			t.Errorf("hosts %v: %d admitted for one token, want exactly 1", pair, in)
		}
	}
	for key := range reg.Refused {
		tid, fp, _ := strings.Cut(key, "/")
		if a := reg.Admitted[tid]; a != nil && a.NodeID == fp {
			t.Errorf("admitted request %s is also recorded as refused", key)
		}
	}
}

func TestExpiredToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tok := f.issue(IssueOptions{Name: "web-1", Expires: time.Hour})
	// At the host: join refuses an expired token before writing anything.
	_, err := f.tryJoin("late", tok.String(), t0.Add(time.Hour), false)
	if fault.ClassOf(err) != fault.Refused || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("join with an expired token: %v (class %v), want refused", err, fault.ClassOf(err))
	}
	state, config := f.hostDirs("late")
	if exists(state) || exists(config) {
		t.Error("a refused join left a state directory or config behind")
	}
	// At the mesh: joined in time, admitted too late.
	j := f.join("a", tok, t0.Add(30*time.Minute))
	res, _ := f.admit(t0.Add(2 * time.Hour))
	refusedOnly(t, res, j.NodeID, "token expired at")
	notAdmitted(t, f, j.NodeID)
}

// A mistyped token is caught at the host before anything is created or
// sent.
func TestMistypedToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tok := f.issue(IssueOptions{Name: "web-1"}).String()
	i := len(token.Prefix) + 20
	c := byte('A')
	if tok[i] == 'A' {
		c = 'B'
	}
	bad := tok[:i] + string(c) + tok[i+1:]
	_, err := f.tryJoin("a", bad, tJoin, false)
	if !errors.Is(err, token.ErrMalformed) {
		t.Fatalf("join with a mistyped token: %v, want ErrMalformed", err)
	}
	state, config := f.hostDirs("a")
	if exists(state) || exists(config) {
		t.Error("a join with a mistyped token left files behind")
	}
	if n := count(t, f, spool.EnrolJoinPrefix) + count(t, f, spool.BriefPrefix); n != 0 {
		t.Errorf("a join with a mistyped token wrote %d objects", n)
	}
}

func TestPlainTokenForEnrolledName(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tok := f.issue(IssueOptions{Name: "web-1"})
	f.join("a", tok, tJoin)
	f.admit(tAdmit)
	// Refused at issue, with the hint to re-enrol.
	_, err := f.tryIssue(IssueOptions{Name: "web-1", Now: tAdmit})
	if fault.ClassOf(err) != fault.Refused || !strings.Contains(fault.HintOf(err), "muster enrol issue web-1 --reenrol") {
		t.Fatalf("plain token for an enrolled name: %v (hint %q)", err, fault.HintOf(err))
	}
	// A re-enrolment of a name that is not enrolled is refused too.
	if _, err := f.tryIssue(IssueOptions{Name: "db-1", Reenrol: true}); err == nil || !strings.Contains(fault.HintOf(err), "muster enrol issue db-1") {
		t.Errorf("re-enrolment token for a name never enrolled: %v", err)
	}
}

// Two plain tokens for one name, both issued while it was free: the first
// admitted wins, and the second cannot take the name over.
func TestPlainTokenForNameEnrolledInBetween(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	t1 := f.issue(IssueOptions{Name: "web-1"})
	t2 := f.issue(IssueOptions{Name: "web-1"})
	a := f.join("a", t1, tJoin)
	f.admit(tAdmit)
	b := f.join("b", t2, tAdmit.Add(time.Minute))
	res, reg := f.admit(tAdmit.Add(2 * time.Minute))
	refusedOnly(t, res, b.NodeID, "a plain token can never take over an enrolled name")
	if id := reg.Enrolled("web-1"); id == nil || id.NodeID != a.NodeID {
		t.Errorf("web-1 is %+v, want the first host", id)
	}
	notAdmitted(t, f, b.NodeID)
	// Both pending at once: one admit decides them one after another,
	// and exactly one gets the name.
	g := newFixture(t)
	t3 := g.issue(IssueOptions{Name: "db-1"})
	t4 := g.issue(IssueOptions{Name: "db-1"})
	c := g.join("c", t3, tJoin)
	d := g.join("d", t4, tJoin.Add(time.Second))
	res, reg = g.admit(tAdmit)
	if len(res.Admitted) != 1 || len(res.Refused) != 1 || res.Admitted[0].NodeID == res.Refused[0].HostFP {
		t.Fatalf("admit of two plain tokens for one name: %+v", res)
	}
	if !strings.Contains(res.Refused[0].Reason, "a plain token can never take over an enrolled name") {
		t.Errorf("refused for %q", res.Refused[0].Reason)
	}
	if len(reg.Active()) != 1 || reg.Enrolled("db-1").NodeID != res.Admitted[0].NodeID {
		t.Errorf("%d active identities for one name", len(reg.Active()))
	}
	for _, fp := range []string{c.NodeID, d.NodeID} {
		if fp != res.Admitted[0].NodeID {
			notAdmitted(t, g, fp)
		}
	}
}

// A join request whose proof was made with another token is refused, and
// the token it names stays usable by its real holder.
func TestForgedProof(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	web := f.issue(IssueOptions{Name: "web-1"})
	other := f.issue(IssueOptions{Name: "db-1"})
	data, fp := joinRequest(t, f.m, web.ID(), "web-1", other, tJoin)
	f.put(spool.JoinName(web.ID(), fp), data)
	res, _ := f.admit(tAdmit)
	refusedOnly(t, res, fp, "its proof was not made with token "+web.ID())
	notAdmitted(t, f, fp)
	// A proof over other host keys, moved into this request, fails the
	// same way: the proof covers the host keys.
	pair, err := keys.Generate()
	if err != nil {
		t.Fatal(err)
	}
	req := JoinRequest{Version: recordVersion, TokenID: web.ID(), Name: "web-1", Host: pair.Public(), Time: tJoin}
	otherKeys, _ := keys.Generate()
	req.Proof = encodeSig(web.ProofKey(), proofMessage(web.ID(), "web-1", otherKeys.Public()))
	moved, err := bundle.SealTOML(req, joinCtx(web.ID(), req.Host.Fingerprint()), pair.Sign, f.m.Pair.Age.Recipient())
	if err != nil {
		t.Fatal(err)
	}
	f.put(spool.JoinName(web.ID(), req.Host.Fingerprint()), moved)
	res, _ = f.admit(tAdmit)
	refusedOnly(t, res, req.Host.Fingerprint(), "its proof was not made with token")
	// The real host still gets in.
	j := f.join("a", web, tAdmit)
	res, _ = f.admit(tAdmit.Add(time.Minute))
	if len(res.Admitted) != 1 || res.Admitted[0].NodeID != j.NodeID {
		t.Errorf("the real holder of the token was not admitted: %+v", res)
	}
}

// A join request copied under another name after admission is refused: the
// bundle is bound to the name it was written under.
func TestJoinRequestReplayedAfterAdmission(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tok := f.issue(IssueOptions{Name: "web-1"})
	other := f.issue(IssueOptions{Name: "db-1"})
	j := f.join("a", tok, tJoin)
	f.admit(tAdmit)
	data, err := f.m.Spool.Get(f.ctx, spool.JoinName(tok.ID(), j.NodeID), 0)
	if err != nil {
		t.Fatal(err)
	}
	pair, _ := keys.Generate()
	fp := pair.Public().Fingerprint()
	// Under another host's fingerprint, and under another token.
	f.put(spool.JoinName(tok.ID(), fp), data)
	f.put(spool.JoinName(other.ID(), j.NodeID), data)
	res, reg := f.admit(tAdmit.Add(time.Minute))
	if len(res.Admitted) != 0 || len(res.Refused) != 2 {
		t.Fatalf("admit of replayed requests: %+v", res)
	}
	for _, r := range res.Refused {
		if !strings.Contains(r.Reason, "cannot be verified") {
			t.Errorf("replay refused for %q, want it unverifiable where it is", r.Reason)
		}
	}
	notAdmitted(t, f, fp)
	if len(reg.Active()) != 1 || reg.Enrolled("web-1").NodeID != j.NodeID || reg.Admitted[other.ID()] != nil {
		t.Errorf("the replay changed the registry: %+v", reg.Active())
	}
	if res, _ := f.admit(tAdmit.Add(2 * time.Minute)); len(res.Admitted)+len(res.Refused) != 0 {
		t.Errorf("admit again: %+v", res)
	}
}

// A join request naming a token this mesh never issued is refused.
func TestTokenNeverIssued(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	stray, err := token.New("web-1", f.m.Public().Fingerprint(), t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	data, fp := joinRequest(t, f.m, stray.ID(), "web-1", stray, tJoin)
	f.put(spool.JoinName(stray.ID(), fp), data)
	// And one under a random token id.
	var raw [16]byte
	rand.Read(raw[:])
	rid := hex.EncodeToString(raw[:])
	data2, fp2 := joinRequest(t, f.m, rid, "web-1", stray, tJoin)
	f.put(spool.JoinName(rid, fp2), data2)
	res, reg := f.admit(tAdmit)
	if len(res.Admitted) != 0 || len(res.Refused) != 2 {
		t.Fatalf("admit: %+v", res)
	}
	for _, r := range res.Refused {
		if !strings.Contains(r.Reason, "was ever issued by this mesh") {
			t.Errorf("refused for %q", r.Reason)
		}
	}
	if len(reg.Identities) != 0 {
		t.Errorf("identities admitted: %v", reg.Identities)
	}
}

// A join request for another name than its token was issued for is
// refused, even with a valid proof: the name is fixed when the token is
// issued.
func TestTokenForAnotherName(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tok := f.issue(IssueOptions{Name: "web-1"})
	data, fp := joinRequest(t, f.m, tok.ID(), "db-1", tok, tJoin)
	f.put(spool.JoinName(tok.ID(), fp), data)
	res, _ := f.admit(tAdmit)
	refusedOnly(t, res, fp, "token was issued for web-1, not db-1")
	notAdmitted(t, f, fp)
}

// A join request that is not a sealed bundle to this mesh, or is damaged,
// is refused with the reason, and admit goes on with the others.
func TestDamagedJoinRequest(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tok := f.issue(IssueOptions{Name: "web-1"})
	good := f.issue(IssueOptions{Name: "db-1"})
	data, fp := joinRequest(t, f.m, tok.ID(), "web-1", tok, tJoin)
	data[len(data)-10] ^= 1
	f.put(spool.JoinName(tok.ID(), fp), data)
	j := f.join("a", good, tJoin)
	res, _ := f.admit(tAdmit)
	if len(res.Admitted) != 1 || res.Admitted[0].NodeID != j.NodeID || len(res.Refused) != 1 || res.Refused[0].HostFP != fp {
		t.Fatalf("admit: %+v", res)
	}
	notAdmitted(t, f, fp)
}

func count(t *testing.T, f *fixture, prefix string) int {
	t.Helper()
	n := 0
	if err := f.m.Spool.List(f.ctx, prefix, func(spool.Info) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// PreviewAdmit decides as Admit does and writes nothing: the spool is
// byte for byte as it was, and a real admit afterwards decides the same.
func TestPreviewAdmitWritesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.join("a", f.issue(IssueOptions{Name: "web-1"}), tJoin)
	tok := f.issue(IssueOptions{Name: "web-2"})
	f.join("b", tok, tJoin)
	c := f.join("c", tok, tJoin.Add(time.Second)) // the token is spent by b
	before := spoolFiles(t, f)
	pres, preg, err := PreviewAdmit(f.ctx, f.m, tAdmit)
	if err != nil {
		t.Fatal(err)
	}
	if after := spoolFiles(t, f); !maps.Equal(before, after) {
		t.Fatalf("preview wrote to the spool: %d objects before, %d after", len(before), len(after))
	}
	if preg.Enrolled("web-1") == nil || preg.Enrolled("web-1").NodeID != a.NodeID || preg.Enrolled("web-2") == nil {
		t.Errorf("preview registry: %+v", preg.Nodes)
	}
	if f.registry().Enrolled("web-1") != nil {
		t.Error("web-1 is enrolled after a preview")
	}
	res, _ := f.admit(tAdmit)
	if !slices.Equal(pres.Admitted, res.Admitted) || len(pres.Refused) != 1 || len(res.Refused) != 1 || pres.Refused[0].HostFP != c.NodeID || pres.Refused[0] != res.Refused[0] {
		t.Errorf("preview decided %+v, admit %+v", pres, res)
	}
}

// spoolFiles maps every file in the fixture's spool to its content.
func spoolFiles(t *testing.T, f *fixture) map[string]string {
	t.Helper()
	out := map[string]string{}
	root := f.m.Spool.(*spool.Dir).Path()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		out[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
