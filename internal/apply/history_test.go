package apply_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/apply"
	"github.com/muster-tool/muster/internal/declaration"
	"github.com/muster-tool/muster/internal/declare"
	"github.com/muster-tool/muster/internal/enrol"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/internal/mesh"
	"github.com/muster-tool/muster/internal/outcome"
	"github.com/muster-tool/muster/spool"
)

func motd(text string) string {
	return everyNode + "[role.all.file.\"/etc/motd\"]\ncontent = \"" + text + "\\n\"\n"
}

// declareWith declares src with options o (Now defaults to the present).
func (f *fixture) declareWith(src string, o declare.Options) *declare.Result {
	f.t.Helper()
	decl, problems := declaration.Parse([]declaration.Source{{Name: "site.toml", Data: []byte(src), Dir: f.dir}})
	if declaration.HasErrors(problems) {
		f.t.Fatalf("declaration: %v", problems)
	}
	_, reg, err := enrol.Admit(f.ctx, f.m, time.Now())
	if err != nil {
		f.t.Fatal(err)
	}
	briefs, _, err := reg.Briefings(f.ctx, f.m)
	if err != nil {
		f.t.Fatal(err)
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	res, err := declare.Declare(f.ctx, f.m, reg, briefs, decl, o)
	if err != nil {
		f.t.Fatalf("declare: %v", err)
	}
	return res
}

// swapSpool replaces the spool directory every host reads with dir's
// content, keeping the old one aside, and returns the path it was moved
// to: as when an operator restores a spool from a backup in place.
func (f *fixture) swapSpool(dir string) string {
	f.t.Helper()
	aside := filepath.Join(f.t.TempDir(), "spool")
	if err := os.Rename(f.spool, aside); err != nil {
		f.t.Fatal(err)
	}
	if err := os.Rename(dir, f.spool); err != nil {
		f.t.Fatal(err)
	}
	return aside
}

// copyOf copies the fixture's spool to a new directory.
func (f *fixture) copyOf() string {
	f.t.Helper()
	dir := filepath.Join(f.t.TempDir(), "copy")
	to, err := spool.OpenDir(dir)
	if err != nil {
		if err := os.Mkdir(dir, 0o755); err != nil {
			f.t.Fatal(err)
		}
		if to, err = spool.OpenDir(dir); err != nil {
			f.t.Fatal(err)
		}
	}
	if _, err := spool.Sync(f.ctx, f.m.Spool, to, spool.SyncOptions{}); err != nil {
		f.t.Fatal(err)
	}
	return dir
}

// The story: the spool is restored from last week's copy, and a mesh that
// does not remember its history (a fresh copy of the mesh directory)
// declares on it, committing a second generation 2. The host that applied
// the first generation 2 refuses the fork, naming both commits, and
// changes nothing; when the real spool returns it applies as before.
func TestHostRefusesForkOfAppliedGeneration(t *testing.T) {
	f := newFixture(t)
	h := f.enrol("web-1")
	f.declare(motd("one"))
	backup := f.copyOf()
	r2 := f.declareWith(motd("two"), declare.Options{})
	f.mustApply(h)
	if got := readFile(t, filepath.Join(h.root, "etc/motd")); got != "two\n" {
		t.Fatalf("motd %q", got)
	}

	real := f.swapSpool(backup)
	if err := os.Remove(mesh.HeadPath(f.m.Dir)); err != nil {
		t.Fatal(err)
	}
	fork := f.declareWith(motd("forked"), declare.Options{})
	if fork.Generation != 2 || fork.Commit == r2.Commit {
		t.Fatalf("fork: generation %d commit %s", fork.Generation, fork.Commit)
	}
	_, err := f.apply(h)
	wantRefused(t, err, "fork refused", "generation 2", generation.ShortDigest(fork.Commit), generation.ShortDigest(r2.Commit))
	if hint := fault.HintOf(err); !strings.Contains(hint, "sync") {
		t.Errorf("hint %q", hint)
	}
	if _, stderr, code := h.run(t, "apply"); code != 3 || !strings.Contains(stderr, "muster: error: fork refused") {
		t.Errorf("muster apply: status %d, stderr %q; want 3", code, stderr)
	}
	if got := readFile(t, filepath.Join(h.root, "etc/motd")); got != "two\n" {
		t.Errorf("the refused fork changed motd to %q", got)
	}

	// A newer commit on the fork: its history does not hold what the
	// host applied.
	fork3 := f.declareWith(motd("forked three"), declare.Options{})
	_, err = f.apply(h)
	wantRefused(t, err, "fork refused", "generation 3", generation.ShortDigest(fork3.Commit), generation.ShortDigest(r2.Commit), generation.ShortDigest(fork.Commit))
	if got := readFile(t, filepath.Join(h.root, "etc/motd")); got != "two\n" {
		t.Errorf("the refused fork changed motd to %q", got)
	}

	// The real spool returns: the host goes on with it, and does not flip.
	f.swapSpool(real)
	if res := f.mustApply(h); res.Generation != 2 || res.Changed != 0 {
		t.Errorf("back on the real spool: generation %d, %d changed", res.Generation, res.Changed)
	}
}

// A host that missed generations follows the history across them: a
// newer commit that holds what it applied is taken, however far back.
func TestHostFollowsHistoryAcrossGenerations(t *testing.T) {
	f := newFixture(t)
	h := f.enrol("web-1")
	f.declare(motd("one"))
	f.mustApply(h)
	for _, s := range []string{"two", "three", "four"} {
		f.declare(motd(s))
	}
	if res := f.mustApply(h); res.Generation != 4 || res.Changed != 1 {
		t.Fatalf("generation %d, %d changed", res.Generation, res.Changed)
	}
	state := readFile(t, filepath.Join(h.state, "state.toml"))
	c, err := generation.ReadCommit(f.ctx, f.m.Spool, 4, f.meshKey())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(state, "commit = \""+c.Digest+"\"") {
		t.Errorf("state does not remember commit %s:\n%s", c.Digest, state)
	}
}

// declare --valid-for: a host past the expiry keeps enforcing the
// generation and repairs drift, but its report carries a failed line that
// says it expired and when, and apply exits non-zero.
func TestExpiredGeneration(t *testing.T) {
	f := newFixture(t)
	h := f.enrol("web-1")
	res := f.declareWith(motd("fresh"), declare.Options{ValidFor: time.Hour})
	if r := f.mustApply(h); r.Failed != 0 {
		t.Fatalf("within the validity: %d failed", r.Failed)
	}
	writeFile(t, filepath.Join(h.root, "etc/motd"), "drifted\n")
	later := func(o *apply.Options) { o.Now = func() time.Time { return time.Now().Add(2 * time.Hour) } }
	r := f.mustApply(h, later)
	if r.Failed != 1 || r.Changed != 1 {
		t.Fatalf("past the expiry: %d failed, %d changed; want the expiry line failed and the drift repaired", r.Failed, r.Changed)
	}
	if got := readFile(t, filepath.Join(h.root, "etc/motd")); got != "fresh\n" {
		t.Errorf("drift not repaired: %q", got)
	}
	var line *outcome.Line
	for i, l := range r.Report.Lines {
		if l.ID == apply.ExpiryLineID {
			line = &r.Report.Lines[i]
		}
	}
	if line == nil || line.Status != outcome.Failed || !strings.Contains(line.Detail, "generation 1 expired at "+res.ExpiresAt.UTC().Format(time.RFC3339)) {
		t.Fatalf("expiry line %+v", line)
	}
	if r.Report.Outcome() != outcome.Failing {
		t.Errorf("outcome %v", r.Report.Outcome())
	}
	sent := f.reports(h)
	if last := sent[len(sent)-1]; last.Outcome() != outcome.Failing {
		t.Errorf("the report sent is %v", last.Outcome())
	}
	// A declare that renews the validity clears it.
	f.declareWith(motd("fresh"), declare.Options{ValidFor: 24 * time.Hour})
	if r := f.mustApply(h, later); r.Failed != 0 || r.Generation != 2 {
		t.Errorf("renewed: generation %d, %d failed", r.Generation, r.Failed)
	}
}

// The generation this host applied is still committed but holds no
// declaration for it any more (removed by hand: spool gc never removes the
// newest generation's, or the host was enrolled again). A host that
// holds that declaration in its cache keeps enforcing it, without reading
// the object again; one that does not finds nothing declared for it, which
// is said, and which is no rollback.
func TestAppliedGenerationWithoutDeclarationIsNoRollback(t *testing.T) {
	f := newFixture(t)
	h := f.enrol("web-1")
	gen := f.declare(motd("one"))
	f.mustApply(h)
	c, err := generation.ReadCommit(f.ctx, f.m.Spool, gen, f.meshKey())
	if err != nil {
		t.Fatal(err)
	}
	if err := f.m.Spool.Delete(f.ctx, spool.DeclName(gen, c.Run, f.options(h).Identity.NodeID())); err != nil {
		t.Fatal(err)
	}
	if res := f.mustApply(h); res.Generation != gen {
		t.Fatalf("apply from the cache: generation %d, want %d", res.Generation, gen)
	}
	if err := os.Remove(filepath.Join(h.state, "declaration.cache")); err != nil {
		t.Fatal(err)
	}
	res, err := f.apply(h)
	if err != nil || !res.Nothing {
		t.Fatalf("apply: %+v, %v; want nothing declared", res, err)
	}
	if w := strings.Join(res.Warnings, "\n"); !strings.Contains(w, "holds no declaration for it any more") {
		t.Errorf("warnings %q", w)
	}
	// With the commit gone too, it is a rollback.
	if err := f.m.Spool.Delete(f.ctx, spool.CommitName(gen)); err != nil {
		t.Fatal(err)
	}
	_, err = f.apply(h)
	wantRefused(t, err, "rollback refused", "no longer in spool")
}

// The story: the spool is on a stick or a bind mount that is not mounted
// now, leaving an empty directory. That is a temporary failure (try again
// later), never a rollback refusal; and once the spool is back, the host
// goes on.
func TestEmptySpoolDirectoryIsNotThere(t *testing.T) {
	f := newFixture(t)
	h := f.enrol("web-1")
	f.declare(motd("one"))
	f.mustApply(h)
	aside := filepath.Join(t.TempDir(), "spool")
	if err := os.Rename(f.spool, aside); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(f.spool, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := f.apply(h)
	if fault.ClassOf(err) != fault.Temporary || !strings.Contains(err.Error(), "holds no mesh keys") {
		t.Fatalf("apply on an empty spool directory: %v (class %v), want a temporary failure", err, fault.ClassOf(err))
	}
	if err := os.Remove(f.spool); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(aside, f.spool); err != nil {
		t.Fatal(err)
	}
	if res := f.mustApply(h); res.Generation != 1 {
		t.Errorf("back: generation %d", res.Generation)
	}
}
