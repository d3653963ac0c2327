package generation_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/internal/keys"
	"github.com/muster-tool/muster/spool"
)

type fixture struct {
	t    *testing.T
	ctx  context.Context
	sp   spool.Spool
	mesh *keys.Pair
}

func newFixture(t *testing.T) *fixture {
	sp, err := spool.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pair, err := keys.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, ctx: context.Background(), sp: sp, mesh: pair}
}

func (f *fixture) pub() ed25519.PublicKey { return f.mesh.Sign.Public().(ed25519.PublicKey) }

// commit makes generation gen's commit following prev (nil: the first),
// signed by key, and returns its bytes; put writes them to sp.
func (f *fixture) commit(key ed25519.PrivateKey, gen uint64, prev *generation.Commit, run string) []byte {
	f.t.Helper()
	c := generation.Commit{Version: generation.CommitVersion, Generation: gen, Run: run, DeclaredAt: time.Unix(1700000000, 0).UTC()}
	if prev != nil {
		c.Previous, c.PreviousGeneration = prev.Digest, prev.Generation
	}
	data, err := bundle.SignTOML(c, generation.CommitCtx(gen), key)
	if err != nil {
		f.t.Fatal(err)
	}
	return data
}

func (f *fixture) put(sp spool.Spool, gen uint64, data []byte) *generation.Commit {
	f.t.Helper()
	if err := sp.Put(f.ctx, spool.CommitName(gen), data); err != nil {
		f.t.Fatal(err)
	}
	c, err := generation.OpenCommit(data, gen, f.pub())
	if err != nil {
		return nil // junk
	}
	return c
}

func (f *fixture) history(sp spool.Spool) *generation.History {
	f.t.Helper()
	h, err := generation.LoadHistory(f.ctx, sp, f.pub())
	if err != nil {
		f.t.Fatal(err)
	}
	return h
}

// A commit signed by another key, dropped in the spool at a high
// generation, is skipped and named; the newest commit that verifies stands,
// and the next commit goes to the first free name.
func TestHistorySkipsJunk(t *testing.T) {
	f := newFixture(t)
	c1 := f.put(f.sp, 1, f.commit(f.mesh.Sign, 1, nil, "a"))
	c2 := f.put(f.sp, 2, f.commit(f.mesh.Sign, 2, c1, "b"))
	rogue, _ := keys.Generate()
	f.put(f.sp, 3, f.commit(rogue.Sign, 3, c2, "x"))
	f.put(f.sp, 900, f.commit(rogue.Sign, 900, c2, "y"))
	// A damaged object: a valid commit cut short.
	good := f.commit(f.mesh.Sign, 901, c2, "z")
	if err := f.sp.Put(f.ctx, spool.CommitName(901), good[:len(good)-5]); err != nil {
		t.Fatal(err)
	}
	// A genuine commit filed under another generation's name.
	if err := f.sp.Put(f.ctx, spool.CommitName(902), f.commit(f.mesh.Sign, 2, c1, "b")); err != nil {
		t.Fatal(err)
	}

	h := f.history(f.sp)
	newest, err := h.Newest(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if newest == nil || newest.Generation != 2 || newest.Digest != c2.Digest {
		t.Fatalf("newest = %+v, want generation 2", newest)
	}
	var names []string
	for _, s := range h.Skipped {
		if !errors.Is(s.Err, generation.ErrUnverified) {
			t.Errorf("%s: error does not wrap ErrUnverified: %v", s.Name, s.Err)
		}
		names = append(names, s.Name)
	}
	want := []string{spool.CommitName(902), spool.CommitName(901), spool.CommitName(900), spool.CommitName(3)}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("skipped %v, want %v", names, want)
	}
	if got := h.NextFree(2); got != 4 {
		t.Errorf("NextFree(2) = %d, want 4 (3 is taken by junk)", got)
	}
	// Nothing was deleted.
	for _, g := range []uint64{3, 900, 901, 902} {
		if _, err := f.sp.Stat(f.ctx, spool.CommitName(g)); err != nil {
			t.Errorf("commit %d: %v", g, err)
		}
	}
}

func TestHistoryTrace(t *testing.T) {
	f := newFixture(t)
	c1 := f.put(f.sp, 1, f.commit(f.mesh.Sign, 1, nil, "a"))
	c2 := f.put(f.sp, 2, f.commit(f.mesh.Sign, 2, c1, "b"))
	c3 := f.put(f.sp, 3, f.commit(f.mesh.Sign, 3, c2, "c"))
	c5 := f.put(f.sp, 5, f.commit(f.mesh.Sign, 5, c3, "e")) // 4 was junk at the time
	// Another copy of the same mesh's spool forked at 2.
	other, _ := spool.OpenDir(t.TempDir())
	f.put(other, 1, f.commit(f.mesh.Sign, 1, nil, "a"))
	f.put(other, 2, f.commit(f.mesh.Sign, 2, c1, "b"))
	d3 := f.put(other, 3, f.commit(f.mesh.Sign, 3, c2, "forked"))
	d4 := f.put(other, 4, f.commit(f.mesh.Sign, 4, d3, "forked-4"))

	h := f.history(f.sp)
	for _, tc := range []struct {
		name    string
		from    *generation.Commit
		gen     uint64
		digest  string
		verdict generation.Verdict
	}{
		{"itself", c3, 3, c3.Digest, generation.Holds},
		{"direct parent", c3, 2, c2.Digest, generation.Holds},
		{"across a gap", c5, 1, c1.Digest, generation.Holds},
		{"another commit at the same generation", c3, 3, d3.Digest, generation.Diverges},
		{"a history without the one applied", c5, 3, d3.Digest, generation.Diverges},
		{"passed over", c5, 4, d4.Digest, generation.Diverges},
		{"before the first commit", c1, 0, "", generation.Diverges},
	} {
		tr, err := h.Trace(f.ctx, tc.from, tc.gen, tc.digest)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Verdict != tc.verdict {
			t.Errorf("%s: verdict %d, want %d (%+v)", tc.name, tr.Verdict, tc.verdict, tr)
		}
	}

	// A history whose commits are missing from the spool is unknown, not
	// a fork: the host cannot tell.
	sparse, _ := spool.OpenDir(t.TempDir())
	f.put(sparse, 5, f.commit(f.mesh.Sign, 5, c3, "e"))
	hs := f.history(sparse)
	tr, err := hs.Trace(f.ctx, c5, 1, c1.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Verdict != generation.Unknown || tr.At != 3 {
		t.Errorf("sparse: %+v, want unknown at 3", tr)
	}
	// ... but a commit that names the generation directly is known.
	tr, _ = hs.Trace(f.ctx, c5, 3, d3.Digest)
	if tr.Verdict != generation.Diverges || tr.Named != c3.Digest {
		t.Errorf("sparse, direct parent: %+v, want diverges naming c3", tr)
	}
}

// Two copies merged: the spool holds 1, 2, 3 of one history and 4 of
// another that forked at 2; Forks names the place.
func TestForks(t *testing.T) {
	f := newFixture(t)
	c1 := f.put(f.sp, 1, f.commit(f.mesh.Sign, 1, nil, "a"))
	c2 := f.put(f.sp, 2, f.commit(f.mesh.Sign, 2, c1, "b"))
	f.put(f.sp, 3, f.commit(f.mesh.Sign, 3, c2, "c"))
	other, _ := spool.OpenDir(t.TempDir())
	d3 := f.put(other, 3, f.commit(f.mesh.Sign, 3, c2, "forked"))
	f.put(f.sp, 4, f.commit(f.mesh.Sign, 4, d3, "forked-4"))
	forks, err := f.history(f.sp).Forks(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(forks) != 1 || forks[0].Generation != 4 || forks[0].At != 3 || forks[0].Named != d3.Digest {
		t.Fatalf("forks = %+v", forks)
	}
	if s := forks[0].String(); !strings.Contains(s, "two histories") {
		t.Errorf("fork reads %q", s)
	}

	// A commit passing over a verified one is a fork too.
	g, _ := spool.OpenDir(t.TempDir())
	e1 := f.put(g, 1, f.commit(f.mesh.Sign, 1, nil, "a"))
	f.put(g, 2, f.commit(f.mesh.Sign, 2, e1, "b"))
	f.put(g, 3, f.commit(f.mesh.Sign, 3, e1, "skips-2"))
	forks, _ = f.history(g).Forks(f.ctx)
	if len(forks) != 1 || forks[0].Generation != 3 || forks[0].At != 2 || forks[0].Named != "" {
		t.Fatalf("forks = %+v", forks)
	}
	// A straight history has none.
	forks, _ = f.history(other).Forks(f.ctx)
	if len(forks) != 0 {
		t.Errorf("forks in a straight history: %+v", forks)
	}
}

func TestExpired(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	c := generation.Commit{}
	if c.Expired(now) {
		t.Error("a commit without expiry expired")
	}
	c.ExpiresAt = now
	if c.Expired(now) {
		t.Error("expired at the instant of expiry")
	}
	if !c.Expired(now.Add(time.Nanosecond)) {
		t.Error("not expired after its expiry")
	}
}

// A commit a reader verified before (Known: kept under its own key) is
// not verified against the mesh's key again when the spool holds those
// very bytes; any other bytes are, and the signer is checked either way.
func TestHistoryKnownCommitIsNotVerifiedAgain(t *testing.T) {
	f := newFixture(t)
	c1 := f.put(f.sp, 1, f.commit(f.mesh.Sign, 1, nil, "a"))
	good := f.commit(f.mesh.Sign, 2, c1, "b")
	// Bytes whose signature no longer verifies: only a reader that kept
	// their digest takes them, which shows it did not verify them.
	badSig := bytes.Clone(good)
	badSig[len(badSig)-1] ^= 1
	f.put(f.sp, 2, badSig)
	rogue, _ := keys.Generate()
	rogueData := f.commit(rogue.Sign, 3, c1, "x")
	f.put(f.sp, 3, rogueData)

	newest := func(known *generation.Known) uint64 {
		t.Helper()
		h, err := generation.LoadHistoryFrom(f.ctx, f.sp, f.pub(), 1, known)
		if err != nil {
			t.Fatal(err)
		}
		c, err := h.Newest(f.ctx)
		if err != nil || c == nil {
			t.Fatalf("newest: %v, %v", c, err)
		}
		return c.Generation
	}
	if g := newest(nil); g != 1 {
		t.Errorf("with nothing known the newest is %d, want 1: a bad signature was taken", g)
	}
	if g := newest(&generation.Known{Generation: 2, Digest: generation.Digest(badSig)}); g != 2 {
		t.Errorf("with generation 2's bytes known the newest is %d, want 2: they were verified again", g)
	}
	for name, k := range map[string]*generation.Known{
		"another digest":     {Generation: 2, Digest: generation.Digest(good)},
		"another generation": {Generation: 1, Digest: generation.Digest(badSig)},
		"a digest unparsed":  {Generation: 2, Digest: "sha256:zz"},
		"a rogue's commit":   {Generation: 3, Digest: generation.Digest(rogueData)},
	} {
		if g := newest(k); g != 1 {
			t.Errorf("%s known: the newest is %d, want 1", name, g)
		}
	}
}
