package declare

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/internal/keys"
	"github.com/muster-tool/muster/internal/mesh"
	"github.com/muster-tool/muster/spool"
)

// Each commit names the one it follows, and the mesh directory remembers
// the newest it made.
func TestCommitsChainAndHeadIsRemembered(t *testing.T) {
	f := newFixture(t)
	f.enrol("web-1", nil)
	r1 := f.mustDeclare(f.parse(markedSite("one"), nil), Options{})
	r2 := f.mustDeclare(f.parse(markedSite("two"), nil), Options{})
	c1, c2 := f.commit(1), f.commit(2)
	if c1.Previous != "" || c1.PreviousGeneration != 0 || c1.Version != generation.CommitVersion {
		t.Errorf("first commit = %+v, want no predecessor", c1)
	}
	if c2.Previous != c1.Digest || c2.PreviousGeneration != 1 {
		t.Errorf("commit 2 follows %d %q, want 1 %q", c2.PreviousGeneration, c2.Previous, c1.Digest)
	}
	if r1.Commit != c1.Digest || r2.Commit != c2.Digest {
		t.Errorf("results name commits %q %q, want %q %q", r1.Commit, r2.Commit, c1.Digest, c2.Digest)
	}
	head, err := f.m.Head()
	if err != nil || head == nil || head.Generation != 2 || head.Commit != c2.Digest {
		t.Fatalf("head = %+v, %v; want generation 2, %s", head, err, c2.Digest)
	}
}

// copySpool copies a directory spool, as a backup or a USB stick does.
func copySpool(t *testing.T, from spool.Spool) spool.Spool {
	t.Helper()
	to, err := spool.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := spool.Sync(t.Context(), from, to, spool.SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	return to
}

// The story: a spool is restored from last week's copy, and the mesh
// declares on it. It must be refused, so the restored spool never gets a
// second generation N; syncing the newer copy back lets declare go on.
func TestRestoredSpoolRefused(t *testing.T) {
	f := newFixture(t)
	f.enrol("web-1", nil)
	f.mustDeclare(f.parse(markedSite("one"), nil), Options{})
	backup := copySpool(t, f.m.Spool)
	f.mustDeclare(f.parse(markedSite("two"), nil), Options{})
	f.mustDeclare(f.parse(markedSite("three"), nil), Options{})
	newer := f.m.Spool

	f.m.Spool = backup
	before := spoolNames(t, backup)
	for _, dry := range []bool{true, false} {
		_, err := f.declare(f.parse(markedSite("four"), nil), Options{DryRun: dry})
		if fault.ClassOf(err) != fault.Refused {
			t.Fatalf("declare on a restored spool (dry run %v): %v (class %v), want refused", dry, err, fault.ClassOf(err))
		}
		for _, want := range []string{"older than this mesh's history", "newest commit is generation 1", "committed generation 3"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
		if h := fault.HintOf(err); !strings.Contains(h, "muster spool sync") || !strings.Contains(h, mesh.HeadFile) {
			t.Errorf("hint %q does not say how to sync back or what to move away", h)
		}
	}
	if after := spoolNames(t, backup); !slices.Equal(before, after) {
		t.Errorf("the refused declare wrote to the spool: %v", after)
	}

	// Sync the newer copy back: declare goes on as generation 4.
	if _, err := spool.Sync(t.Context(), newer, backup, spool.SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	if res := f.mustDeclare(f.parse(markedSite("four"), nil), Options{}); res.Generation != 4 {
		t.Errorf("after syncing back: generation %d, want 4", res.Generation)
	}
}

// Two operators of one mesh, each on their own copy: each commits
// generation 2. When one declares on a spool holding the other's history,
// it is refused, naming both commits.
func TestOtherHistoryRefused(t *testing.T) {
	a := newFixture(t)
	a.enrol("web-1", nil)
	a.mustDeclare(a.parse(markedSite("one"), nil), Options{})
	// b is the same mesh (a copy of the mesh directory) on a copy of the
	// spool.
	b := a.other()
	bdir := t.TempDir()
	copyDir(t, a.m.Dir, bdir)
	b.m.Dir = bdir
	b.m.Spool = copySpool(t, a.m.Spool)

	ra := a.mustDeclare(a.parse(markedSite("a-two"), nil), Options{})
	rb := b.mustDeclare(b.parse(markedSite("b-two"), nil), Options{})
	rb3 := b.mustDeclare(b.parse(markedSite("b-three"), nil), Options{})
	if ra.Generation != 2 || rb.Generation != 2 || rb3.Generation != 3 {
		t.Fatalf("generations %d %d %d", ra.Generation, rb.Generation, rb3.Generation)
	}

	// a declares on b's spool: same generation 2 with another commit,
	// and a newer one on top of it.
	aSpool := a.m.Spool
	a.m.Spool = b.m.Spool
	_, err := a.declare(a.parse(markedSite("a-three"), nil), Options{})
	if fault.ClassOf(err) != fault.Refused {
		t.Fatalf("declare on another history: %v (class %v), want refused", err, fault.ClassOf(err))
	}
	for _, want := range []string{"holds another history of this mesh", generation.ShortDigest(ra.Commit), generation.ShortDigest(rb.Commit)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}

	// b declares on a spool where a's generation 2 stands: refused too,
	// b committed generation 3 there.
	b2 := b.other()
	b2.m.Spool = copySpool(t, aSpool)
	_, err = b2.declare(b2.parse(markedSite("b-four"), nil), Options{})
	if fault.ClassOf(err) != fault.Refused {
		t.Fatalf("b on a's spool: %v, want refused", err)
	}
}

// Another machine holding a copy of the mesh directory declared since: the
// spool's history holds this one's newest commit, so declare goes on and
// remembers the newer head.
func TestNewerHistoryAccepted(t *testing.T) {
	a := newFixture(t)
	a.enrol("web-1", nil)
	a.mustDeclare(a.parse(markedSite("one"), nil), Options{})
	b := a.other()
	bdir := t.TempDir()
	copyDir(t, a.m.Dir, bdir)
	b.m.Dir = bdir
	b.mustDeclare(b.parse(markedSite("two"), nil), Options{})
	b.mustDeclare(b.parse(markedSite("three"), nil), Options{})
	res := a.mustDeclare(a.parse(markedSite("four"), nil), Options{})
	if res.Generation != 4 || len(res.Warnings) != 0 {
		t.Fatalf("result %+v", res)
	}
	if h, _ := a.m.Head(); h == nil || h.Generation != 4 {
		t.Errorf("head %+v, want 4", h)
	}
}

// A mesh directory that remembers nothing (made before muster kept a head)
// declares as before and starts remembering.
func TestNoHeadDeclares(t *testing.T) {
	f := newFixture(t)
	f.enrol("web-1", nil)
	f.mustDeclare(f.parse(markedSite("one"), nil), Options{})
	if err := os.Remove(mesh.HeadPath(f.m.Dir)); err != nil {
		t.Fatal(err)
	}
	if res := f.mustDeclare(f.parse(markedSite("two"), nil), Options{}); res.Generation != 2 {
		t.Fatalf("generation %d", res.Generation)
	}
	if h, _ := f.m.Head(); h == nil || h.Generation != 2 {
		t.Errorf("head %+v", h)
	}
	// A head that cannot be read stops declare with a hint, rather than
	// being taken as none.
	if err := os.WriteFile(mesh.HeadPath(f.m.Dir), []byte("generation = \"x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := f.declare(f.parse(markedSite("three"), nil), Options{})
	if err == nil || !strings.Contains(err.Error(), mesh.HeadFile) || fault.HintOf(err) == "" {
		t.Errorf("corrupt head: %v", err)
	}
}

// The story: someone who can write to a shared bucket drops a commit with a
// high generation signed by another key. Declare skips it with a warning
// naming it, never deletes it, and commits the next generation after the
// newest that verifies, at the first free name.
func TestForeignCommitSkipped(t *testing.T) {
	f := newFixture(t)
	f.enrol("web-1", nil)
	f.mustDeclare(f.parse(markedSite("one"), nil), Options{})
	rogue, err := keys.Generate()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []uint64{2, 99999} {
		junk := generation.Commit{Version: generation.CommitVersion, Generation: g, Run: "0123456789abcdef", DeclaredAt: time.Now().UTC()}
		data, err := bundle.SignTOML(junk, generation.CommitCtx(g), rogue.Sign)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.m.Spool.Put(f.ctx, spool.CommitName(g), data); err != nil {
			t.Fatal(err)
		}
	}
	res := f.mustDeclare(f.parse(markedSite("two"), nil), Options{})
	if res.Generation != 3 || res.Previous != 1 || res.Unchanged {
		t.Fatalf("result %+v, want generation 3 after 1 (2 is taken by junk)", res)
	}
	if c := f.commit(3); c.PreviousGeneration != 1 || c.Previous != f.commit(1).Digest {
		t.Errorf("commit 3 follows %d %s", c.PreviousGeneration, c.Previous)
	}
	warned := strings.Join(res.Warnings, "\n")
	for _, g := range []uint64{2, 99999} {
		if !strings.Contains(warned, spool.CommitName(g)) {
			t.Errorf("warnings do not name %s: %q", spool.CommitName(g), warned)
		}
		if _, err := f.m.Spool.Stat(f.ctx, spool.CommitName(g)); err != nil {
			t.Errorf("junk %d was removed: %v", g, err)
		}
	}
	if !strings.Contains(warned, "unexpected key") {
		t.Errorf("warnings do not say why: %q", warned)
	}
	// The node's bundle of generation 3 opens.
	if nd := f.mustOpen("web-1", 3); nd.Generation != 3 {
		t.Errorf("bundle of generation 3 is of %d", nd.Generation)
	}
}

// An expiry is signed into the commit; a declare with one always commits,
// renewing it, and one without it after one with it commits too.
func TestValidFor(t *testing.T) {
	f := newFixture(t)
	f.enrol("web-1", nil)
	d := f.parse(markedSite("one"), nil)
	f.mustDeclare(d, Options{})
	if c := f.commit(1); !c.ExpiresAt.IsZero() {
		t.Errorf("expiry %v without --valid-for", c.ExpiresAt)
	}
	res := f.mustDeclare(d, Options{ValidFor: 48 * time.Hour})
	c := f.commit(2)
	if res.Unchanged || res.Generation != 2 || res.ExpiresAt == nil || !res.ExpiresAt.Equal(c.ExpiresAt) {
		t.Fatalf("result %+v, want generation 2 valid until %v", res, c.ExpiresAt)
	}
	if !c.ExpiresAt.Equal(c.DeclaredAt.Add(48 * time.Hour)) {
		t.Errorf("commit 2 declared %v expires %v", c.DeclaredAt, c.ExpiresAt)
	}
	if res := f.mustDeclare(d, Options{ValidFor: 48 * time.Hour}); res.Unchanged || res.Generation != 3 {
		t.Errorf("renewal: %+v, want generation 3", res)
	}
	if res := f.mustDeclare(d, Options{}); res.Unchanged || res.Generation != 4 || res.ExpiresAt != nil {
		t.Errorf("dropping the expiry: %+v, want generation 4", res)
	}
	if res := f.mustDeclare(d, Options{}); !res.Unchanged || res.Generation != 4 {
		t.Errorf("unchanged: %+v", res)
	}
}

func spoolNames(t *testing.T, sp spool.Spool) []string {
	t.Helper()
	var names []string
	if err := sp.List(t.Context(), "", func(i spool.Info) error {
		names = append(names, i.Name)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return names
}

// copyDir copies the files of a mesh directory.
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}
