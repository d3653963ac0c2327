package enrol

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/keys"
	"github.com/muster-tool/muster/internal/mesh"
	"github.com/muster-tool/muster/spool"
)

// The story: admit reads the tokens this mesh directory issued from its
// journal, where Issue kept them, instead of opening their sealed records
// in the spool again. What the spool holds under a journalled token's
// name no longer decides anything; a token the journal does not name is
// read from the spool, as before, and a record there that is not this
// mesh's admits no one.

func journalPath(f *fixture) string { return filepath.Join(f.m.Dir, mesh.TokensJournal) }

// forgeTokenRecord replaces the spool's record of token is.TokenID with
// is, sealed to the mesh but signed by another key, and returns its name.
func forgeTokenRecord(t *testing.T, f *fixture, is Issued) string {
	t.Helper()
	rogue, err := keys.Generate()
	if err != nil {
		t.Fatal(err)
	}
	forged, err := bundle.SealTOML(is, tokenCtx(is.TokenID), rogue.Sign, f.m.Pair.Age.Recipient())
	if err != nil {
		t.Fatal(err)
	}
	name := spool.TokenName(is.TokenID)
	if err := f.m.Spool.Delete(f.ctx, name); err != nil {
		t.Fatal(err)
	}
	f.put(name, forged)
	return name
}

// A token's record replaced in the spool by one this mesh did not seal,
// for another name and labels, changes nothing: the host is admitted as
// the token was issued. Then with the spool's record gone altogether: it
// was never read.
func TestAdmitReadsIssuedTokensFromTheJournal(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tok := f.issue(IssueOptions{Name: "web-1", Labels: map[string]string{"role": "web"}})
	forgeTokenRecord(t, f, Issued{Version: recordVersion, TokenID: tok.ID(), Name: "db-1", Verifier: encodeKey(tok.Verifier()),
		Expires: tok.Expires, Labels: map[string]string{"role": "db"}, IssuedAt: t0})
	j := f.join("a", tok, tJoin)
	res, reg := f.admit(tAdmit)
	id := reg.Enrolled("web-1")
	if len(res.Admitted) != 1 || id == nil || id.NodeID != j.NodeID || id.Labels["role"] != "web" {
		t.Fatalf("admitted %+v, web-1 is %+v; want web-1 as issued, role=web", res.Admitted, id)
	}
	if len(reg.Skipped) != 0 {
		t.Errorf("the spool's record was read: %v", reg.Skipped)
	}

	tok2 := f.issue(IssueOptions{Name: "web-2"})
	if err := f.m.Spool.Delete(f.ctx, spool.TokenName(tok2.ID())); err != nil {
		t.Fatal(err)
	}
	f.join("b", tok2, tJoin)
	if res, _ := f.admit(tAdmit); len(res.Admitted) != 1 || res.Admitted[0].Name != "web-2" {
		t.Errorf("admitted %+v, want web-2 from the journal alone", res.Admitted)
	}
}

// Without the journal (the token was issued from another copy of the mesh
// directory), a token's record is read from the spool: the mesh's own
// admits, one damaged or forged admits no one and is named.
func TestAdmitWithoutTheJournalOpensTheSpoolsRecords(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	good := f.issue(IssueOptions{Name: "web-1"})
	flipped := f.issue(IssueOptions{Name: "web-2"})
	resealed := f.issue(IssueOptions{Name: "web-3"})
	if err := os.Remove(journalPath(f)); err != nil {
		t.Fatal(err)
	}
	name := spool.TokenName(flipped.ID())
	data, err := f.m.Spool.Get(f.ctx, name, 0)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-10] ^= 1
	if err := f.m.Spool.Delete(f.ctx, name); err != nil {
		t.Fatal(err)
	}
	f.put(name, data)
	name3 := forgeTokenRecord(t, f, Issued{Version: recordVersion, TokenID: resealed.ID(), Name: "web-3", Verifier: encodeKey(resealed.Verifier()),
		Expires: resealed.Expires, IssuedAt: t0})
	f.join("a", good, tJoin)
	j2 := f.join("b", flipped, tJoin)
	j3 := f.join("c", resealed, tJoin)

	res, reg := f.admit(tAdmit)
	if len(res.Admitted) != 1 || res.Admitted[0].Name != "web-1" {
		t.Errorf("admitted %+v, want web-1 alone", res.Admitted)
	}
	notAdmitted(t, f, j2.NodeID)
	notAdmitted(t, f, j3.NodeID)
	if len(res.Refused) != 2 {
		t.Fatalf("refused %v, want web-2's and web-3's", res.Refused)
	}
	for _, r := range res.Refused {
		if !strings.Contains(r.Reason, "was ever issued by this mesh") {
			t.Errorf("refused for %q", r.Reason)
		}
	}
	all := strings.Join(reg.Skipped, "\n")
	for _, n := range []string{name, name3} {
		if !strings.Contains(all, n+" skipped") {
			t.Errorf("skipped %q does not name %s", all, n)
		}
	}
}

// A journal line changed by hand so that its verifier is no longer its
// token's (another token's proof key put in) is not trusted: the token is
// read from the spool, and a proof made with the other key is refused.
func TestAlteredJournalLineIsNotTrusted(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tok := f.issue(IssueOptions{Name: "web-1"})
	other := f.issue(IssueOptions{Name: "web-2"})
	path := journalPath(f)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v, w := encodeKey(tok.Verifier()), encodeKey(other.Verifier())
	if !bytes.Contains(data, []byte(v)) {
		t.Fatalf("journal %s does not hold token %s's verifier", data, tok.ID())
	}
	if err := os.WriteFile(path, bytes.Replace(data, []byte(v), []byte(w), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	// A host holding the other token asks for tok's name with its proof.
	forged, fp := joinRequest(t, f.m, tok.ID(), "web-1", other, tJoin)
	f.put(spool.JoinName(tok.ID(), fp), forged)
	res, _ := f.admit(tAdmit)
	refusedOnly(t, res, fp, "its proof was not made with token "+tok.ID())
	notAdmitted(t, f, fp)
}

// A journal another mesh wrote, put in this mesh's directory, stops admit
// with an error that names the file and says what to do; nothing is
// decided.
func TestJournalOfAnotherMeshIsRefused(t *testing.T) {
	t.Parallel()
	f, g := newFixture(t), newFixture(t)
	tok := f.issue(IssueOptions{Name: "web-1"})
	g.issue(IssueOptions{Name: "web-1"})
	f.join("a", tok, tJoin)
	theirs, err := os.ReadFile(journalPath(g))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(journalPath(f), theirs, 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err = Admit(f.ctx, f.m, tAdmit)
	if err == nil || !strings.Contains(err.Error(), journalPath(f)) || !strings.Contains(err.Error(), "not by this mesh") {
		t.Fatalf("admit with another mesh's journal: %v", err)
	}
	n := 0
	f.m.Spool.List(f.ctx, spool.EnrolAdmitPrefix, func(spool.Info) error { n++; return nil })
	if n != 0 {
		t.Errorf("%d admissions written", n)
	}
}

// A mesh directory copied to another place (another machine) admits the
// tokens it issued before it was copied, from its journal, and keeps
// those it issues after.
func TestCopiedMeshDirectoryAdmits(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	before := f.issue(IssueOptions{Name: "web-1"})
	dst := filepath.Join(t.TempDir(), "mesh")
	if err := os.Mkdir(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(f.m.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			continue // the caches, which a copy may leave behind
		}
		data, err := os.ReadFile(filepath.Join(f.m.Dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	m, err := mesh.Open(f.ctx, dst, "")
	if err != nil {
		t.Fatal(err)
	}
	f.m = m
	after := f.issue(IssueOptions{Name: "web-2"})
	// Neither record is in the spool: both come from the copy's journal.
	for _, tok := range []string{before.ID(), after.ID()} {
		if err := f.m.Spool.Delete(f.ctx, spool.TokenName(tok)); err != nil {
			t.Fatal(err)
		}
	}
	f.join("a", before, tJoin)
	f.join("b", after, tJoin)
	res, _ := f.admit(tAdmit)
	if len(res.Admitted) != 2 || len(res.Refused) != 0 {
		t.Errorf("admit from the copy: %+v", res)
	}
}

// A journal that cannot be written does not cost the operator the token:
// its record is in the spool, so Issue returns it with a warning naming
// the token and the failure, and admit reads it from the spool. Here the
// journal's name is taken by a directory.
func TestTokenIssuedWhenTheJournalCannotBeWritten(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if err := os.Mkdir(journalPath(f), 0o700); err != nil {
		t.Fatal(err)
	}
	var warned []string
	tok := f.issue(IssueOptions{Name: "web-1", Warn: func(w string) { warned = append(warned, w) }})
	if len(warned) != 1 || !strings.Contains(warned[0], tok.ID()) || !strings.Contains(warned[0], "is a directory") {
		t.Fatalf("warnings %q, want one naming token %s and why its journal was not written", warned, tok.ID())
	}
	if err := os.Remove(journalPath(f)); err != nil {
		t.Fatal(err)
	}
	j := f.join("a", tok, tJoin)
	if res, _ := f.admit(tAdmit); len(res.Admitted) != 1 || res.Admitted[0].NodeID != j.NodeID {
		t.Errorf("admitted %+v, want web-1 from the spool's record", res.Admitted)
	}
}

// enrol cancel by name and enrol list's unused tokens take the tokens the
// journal names from it, as admit does, and open no token record; without
// the journal they open the records in the spool and find the same tokens.
func TestCancelAndUnusedTokensReadTheJournal(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, name := range []string{"web-1", "web-2", "db-1"} {
		f.issue(IssueOptions{Name: name})
	}
	f.issue(IssueOptions{Name: "web-1", Now: t0.Add(time.Second)})
	counter := &getCounter{Spool: f.m.Spool}
	f.m.Spool = counter
	opened := func() int {
		n := 0
		for _, name := range counter.take() {
			if strings.HasPrefix(name, spool.EnrolTokenPrefix) {
				n++
			}
		}
		return n
	}
	unused := func() string {
		t.Helper()
		out, err := UnusedTokens(f.ctx, f.m, f.registry(), tJoin)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, is := range out {
			names = append(names, is.Name)
		}
		return strings.Join(names, " ")
	}
	const want = "db-1 web-1 web-1 web-2"
	counter.take()
	if got, n := unused(), opened(); got != want || n != 0 {
		t.Errorf("unused tokens from the journal: %q, %d records opened; want %q and none", got, n, want)
	}
	res, err := Cancel(f.ctx, f.m, CancelOptions{Name: "web-1", Reason: "lost", Now: tJoin})
	if err != nil || len(res.Cancelled) != 2 {
		t.Fatalf("cancel web-1: %+v, %v; want its two tokens cancelled", res, err)
	}
	if n := opened(); n != 0 {
		t.Errorf("cancel by name opened %d token records, want none", n)
	}

	if err := os.Remove(journalPath(f)); err != nil {
		t.Fatal(err)
	}
	if got, n := unused(), opened(); got != "db-1 web-2" || n != 2 {
		t.Errorf("unused tokens without the journal: %q, %d records opened; want \"db-1 web-2\" from their 2 records", got, n)
	}
}
