package apply_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/apply"
	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/internal/keys"
	"github.com/muster-tool/muster/internal/resource"
	"github.com/muster-tool/muster/spool"
)

// copyTree copies a directory tree (a spool) as cp -a would.
func copyTree(t testing.TB, from, to string) {
	t.Helper()
	if out, err := exec.Command("cp", "-a", from, to).CombinedOutput(); err != nil {
		t.Fatalf("cp -a %s %s: %v: %s", from, to, err, out)
	}
}

// withSpool points an apply at another copy of the spool.
func withSpool(t testing.TB, dir string) func(*apply.Options) {
	return func(o *apply.Options) {
		sp, err := spool.OpenDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		o.Spool = sp
	}
}

// wantRefused checks that err is a refusal whose message holds every one of
// want.
func wantRefused(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("apply succeeded; want it refused")
	}
	if c := fault.ClassOf(err); c != fault.Refused {
		t.Errorf("error class %v, want refused: %v", c, err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}
}

// wantSkipped checks that a run went on past junk, warning of it in words
// that include want.
func wantSkipped(t *testing.T, res *apply.Result, err error, want ...string) {
	t.Helper()
	if err != nil {
		t.Fatalf("apply stopped at junk: %v", err)
	}
	all := strings.Join(res.Warnings, "\n")
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("warnings %q do not mention %q", all, w)
		}
	}
}

// A host never moves backwards: after applying generation 2 it refuses a
// spool whose newest commit is 1 (a copy taken before 2), and a partial copy
// in which its newest generation is older than the one it applied, and it
// changes nothing.
func TestRollbackRefused(t *testing.T) {
	f := newFixture(t)
	h := f.enrol("web-1")
	f.declare(everyNode + "[role.all.file.\"/etc/one\"]\ncontent = \"1\\n\"\n")
	f.mustApply(h)
	before2 := filepath.Join(f.dir, "spool-before-2")
	copyTree(t, f.spool, before2)
	f.declare(everyNode + "[role.all.file.\"/etc/two\"]\ncontent = \"2\\n\"\n")
	if res := f.mustApply(h); res.Generation != 2 || res.Removed != 1 {
		t.Fatalf("generation 2: applied %d, %d removed", res.Generation, res.Removed)
	}

	_, err := f.apply(h, withSpool(t, before2))
	wantRefused(t, err, "rollback", "generation 1", "generation 2")
	if _, err := os.Lstat(filepath.Join(h.root, "etc/one")); !errors.Is(err, fs.ErrNotExist) {
		t.Error("the refused rollback brought back /etc/one")
	}
	if ents, _ := os.ReadDir(filepath.Join(before2, "report")); len(ents) != 1 {
		t.Errorf("spool copy holds %d report directories", len(ents))
	}

	// A partial copy: generation 3 assigns this node nothing, and commit
	// 2 is missing, so the newest generation for this node is 1.
	f.enrol("db-1")
	f.declare("[node.\"db-1\".file.\"/etc/db\"]\ncontent = \"db\\n\"\n")
	partial := filepath.Join(f.dir, "spool-partial")
	copyTree(t, f.spool, partial)
	if err := os.Remove(filepath.Join(partial, spool.CommitName(2))); err != nil {
		t.Fatal(err)
	}
	_, err = f.apply(h, withSpool(t, partial))
	wantRefused(t, err, "rollback", "1", "2")

	// The real spool still works: generation 3 has nothing for this
	// node, so it re-applies generation 2.
	if res := f.mustApply(h); res.Generation != 2 || res.Newest != 3 || res.Failed != 0 {
		t.Errorf("after the refusals: applied %d, newest %d, %d failed", res.Generation, res.Newest, res.Failed)
	}
}

// Another node's bundle copied under this node's name is refused: it is
// encrypted to that node and bound to its name. It is junk, skipped with a
// warning naming it: the host goes on with what it had (here nothing).
func TestOtherNodesBundleRefused(t *testing.T) {
	f := newFixture(t)
	a := f.enrol("web-a")
	b := f.enrol("web-b")
	gen := f.declare("[role.a]\nnodes = [\"web-a\"]\n\n[role.a.file.\"/etc/motd\"]\ncontent = \"for a only\\n\"\n")
	if res := f.mustApply(b); !res.Nothing {
		t.Fatalf("web-b got generation %d, want nothing", res.Generation)
	}
	c, err := generation.ReadCommit(f.ctx, f.m.Spool, gen, f.meshKey())
	if err != nil {
		t.Fatal(err)
	}
	aName := spool.DeclName(gen, c.Run, f.options(a).Identity.NodeID())
	bName := spool.DeclName(gen, c.Run, f.options(b).Identity.NodeID())
	data, err := f.m.Spool.Get(f.ctx, aName, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.m.Spool.Put(f.ctx, bName, data); err != nil {
		t.Fatal(err)
	}
	res, err := f.apply(b)
	wantSkipped(t, res, err, bName)
	if !res.Nothing {
		t.Errorf("web-b applied generation %d", res.Generation)
	}
	if _, errs, code := b.run(t, "apply"); code != 0 || !strings.Contains(errs, "muster: warning: declaration "+bName+" refused") {
		t.Errorf("muster apply on web-b: status %d, stderr %q; want 0 and a warning naming the object", code, errs)
	}
	if _, err := os.Lstat(filepath.Join(b.root, "etc/motd")); !errors.Is(err, fs.ErrNotExist) {
		t.Error("web-b applied web-a's bundle")
	}
	if res := f.mustApply(a); res.Changed != 1 {
		t.Errorf("web-a's own apply: %d changed", res.Changed)
	}
}

// A declaration or a commit signed by any key but the mesh key pinned at
// enrolment is refused, even when it is encrypted to this node and named
// exactly right.
func TestForgedSignerRefused(t *testing.T) {
	f := newFixture(t)
	a := f.enrol("web-a")
	b := f.enrol("web-b")
	gen := f.declare("[role.a]\nnodes = [\"web-a\"]\n\n[role.a.file.\"/etc/motd\"]\ncontent = \"a\\n\"\n")
	rogue, err := keys.Generate()
	if err != nil {
		t.Fatal(err)
	}
	bo := f.options(b)
	c, err := generation.ReadCommit(f.ctx, f.m.Spool, gen, f.meshKey())
	if err != nil {
		t.Fatal(err)
	}

	// A declaration for web-b, sealed to web-b, signed by the rogue key.
	nodeID := bo.Identity.NodeID()
	nd := generation.NodeDeclaration{
		Version: generation.FormatVersion, Generation: gen, Run: c.Run, Node: "web-b", NodeID: nodeID,
		DeclaredAt: time.Now().UTC(),
		Resources:  []resource.Spec{{Kind: resource.File, Path: "/etc/motd", Content: "forged\n"}},
	}
	rcpt, err := bo.Identity.Pair.Public().Recipient()
	if err != nil {
		t.Fatal(err)
	}
	data, err := bundle.SealTOML(nd, generation.DeclCtx(gen, c.Run, nodeID), rogue.Sign, rcpt)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.m.Spool.Put(f.ctx, spool.DeclName(gen, c.Run, nodeID), data); err != nil {
		t.Fatal(err)
	}
	res, err := f.apply(b)
	wantSkipped(t, res, err, spool.DeclName(gen, c.Run, nodeID), "unexpected key")
	if _, _, code := b.run(t, "apply"); code != 0 {
		t.Errorf("muster apply on web-b: status %d, want 0", code)
	}
	if _, err := os.Lstat(filepath.Join(b.root, "etc/motd")); !errors.Is(err, fs.ErrNotExist) {
		t.Error("web-b applied a declaration signed by a rogue key")
	}

	// A commit for generation 2 signed by the rogue key is junk: skipped
	// with a warning naming it, never obeyed, never deleted; the host
	// applies the newest commit that verifies.
	forged := generation.Commit{Version: generation.CommitVersion, Generation: gen + 1, Run: c.Run, DeclaredAt: time.Now().UTC()}
	data, err = bundle.SignTOML(forged, generation.CommitCtx(gen+1), rogue.Sign)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.m.Spool.Put(f.ctx, spool.CommitName(gen+1), data); err != nil {
		t.Fatal(err)
	}
	res, err = f.apply(a)
	if err != nil {
		t.Fatalf("apply past a forged commit: %v", err)
	}
	if res.Generation != gen || res.Newest != gen {
		t.Errorf("applied generation %d (newest %d), want %d", res.Generation, res.Newest, gen)
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], spool.CommitName(gen+1)) || !strings.Contains(res.Warnings[0], "unexpected key") {
		t.Errorf("warnings %q, want one naming %s and why", res.Warnings, spool.CommitName(gen+1))
	}
	if readFile(t, filepath.Join(a.root, "etc/motd")) != "a\n" {
		t.Error("web-a did not apply generation 1 past a forged commit 2")
	}
	if _, err := f.m.Spool.Stat(f.ctx, spool.CommitName(gen+1)); err != nil {
		t.Errorf("the forged commit was removed: %v", err)
	}
	if _, stderr, code := a.run(t, "apply"); code != 0 || !strings.Contains(stderr, "muster: warning: "+spool.CommitName(gen+1)+" skipped") {
		t.Errorf("muster apply: status %d, stderr %q; want 0 and a warning naming the forged commit", code, stderr)
	}
}

// Two applies at once: the second exits at once with a temporary failure
// naming the pid of the first, and the first is not disturbed.
func TestSecondApplyWhileOneRuns(t *testing.T) {
	f := newFixture(t)
	h := f.enrol("web-1")
	f.declare(siteFiles)
	inside := make(chan struct{})
	release := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		calls := 0
		_, err := f.apply(h, func(o *apply.Options) {
			o.Now = func() time.Time {
				// The first call is made holding the lock.
				if calls++; calls == 1 {
					close(inside)
					<-release
				}
				return time.Now()
			}
		})
		done <- err
	}()
	<-inside
	_, err := f.apply(h)
	close(release)
	if err == nil {
		t.Fatal("second apply ran while the first held the lock")
	}
	if c := fault.ClassOf(err); c != fault.Temporary {
		t.Errorf("class %v, want temporary: %v", c, err)
	}
	if want := fmt.Sprintf("another apply is running (pid %d)", os.Getpid()); err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	if err := <-done; err != nil {
		t.Fatalf("first apply: %v", err)
	}
	if res := f.mustApply(h); res.Changed != 0 || res.Failed != 0 {
		t.Errorf("apply after both: %d changed, %d failed; the first did not finish its work", res.Changed, res.Failed)
	}
}

// The declaration cache never vouches for bytes it was not made from: a
// host that holds the declaration of the commit it applied, still
// unchanged in the spool, does not read that object again, so a forgery
// put in its place is never applied; once the object is read (here, the
// cache gone) the new bytes are verified in full and a forgery refused. A
// cache that does not open (damaged, or sealed by another host) is
// ignored.
func TestDeclarationCacheNeverVouchesForChangedObject(t *testing.T) {
	f := newFixture(t)
	h := f.enrol("web-1")
	gen := f.declare(siteFiles)
	f.mustApply(h)
	cache := filepath.Join(h.state, "declaration.cache")
	if _, err := os.Stat(cache); err != nil {
		t.Fatalf("no declaration cache after the first apply: %v", err)
	}

	// A damaged cache is a miss, not an error.
	b, err := os.ReadFile(cache)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 1
	writeFile(t, cache, string(b))
	if res := f.mustApply(h); res.Failed != 0 || res.Unchanged != 4 {
		t.Fatalf("apply with a damaged cache: %d failed, %d unchanged", res.Failed, res.Unchanged)
	}

	// The object is replaced in place (a spool is only files) by a
	// declaration for this node signed by another key.
	o := f.options(h)
	c, err := generation.ReadCommit(f.ctx, f.m.Spool, gen, f.meshKey())
	if err != nil {
		t.Fatal(err)
	}
	rogue, err := keys.Generate()
	if err != nil {
		t.Fatal(err)
	}
	nodeID := o.Identity.NodeID()
	nd := generation.NodeDeclaration{
		Version: generation.FormatVersion, Generation: gen, Run: c.Run, Node: "web-1", NodeID: nodeID,
		Resources: []resource.Spec{{Kind: resource.File, Path: "/etc/motd", Content: "forged\n"}},
	}
	rcpt, err := o.Identity.Pair.Public().Recipient()
	if err != nil {
		t.Fatal(err)
	}
	forged, err := bundle.SealTOML(nd, generation.DeclCtx(gen, c.Run, nodeID), rogue.Sign, rcpt)
	if err != nil {
		t.Fatal(err)
	}
	obj := filepath.Join(f.spool, spool.DeclName(gen, c.Run, nodeID))
	if err := os.Chmod(obj, 0o644); err != nil {
		t.Fatal(err)
	}
	writeFile(t, obj, string(forged))
	if res := f.mustApply(h); res.Failed != 0 || res.Unchanged != 4 {
		t.Fatalf("apply from the cache: %d failed, %d unchanged", res.Failed, res.Unchanged)
	}
	if got := readFile(t, filepath.Join(h.root, "etc/motd")); got != "managed by muster\n" {
		t.Errorf("motd %q: the forged declaration was applied", got)
	}
	if err := os.Remove(cache); err != nil {
		t.Fatal(err)
	}
	_, err = f.apply(h)
	wantRefused(t, err, "refused")
	if got := readFile(t, filepath.Join(h.root, "etc/motd")); got != "managed by muster\n" {
		t.Errorf("motd %q: the forged declaration was applied", got)
	}
}
