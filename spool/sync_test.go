package spool_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"filippo.io/age"

	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/spoolcheck"
	"github.com/muster-tool/muster/internal/testutil/s3server"
	"github.com/muster-tool/muster/spool"
)

// signer makes real bundles for sync tests: objects that pass the
// structural check until a test damages them.
type signer struct {
	key ed25519.PrivateKey
	to  age.Recipient
	rnd *rand.ChaCha8
	mu  sync.Mutex
}

func newSigner(t testing.TB) *signer {
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	return &signer{key: key, to: id.Recipient(), rnd: rand.NewChaCha8([32]byte{1})}
}

// bundle returns a bundle for object name with size bytes of random
// payload: sealed for reports, declarations and briefings, signed for the
// rest, as in a real spool.
func (s *signer) bundle(t testing.TB, name string, size int) []byte {
	t.Helper()
	payload := make([]byte, size)
	s.mu.Lock()
	s.rnd.Read(payload)
	s.mu.Unlock()
	c := bundle.Context{Kind: "test", Name: name}
	var b []byte
	var err error
	if strings.HasPrefix(name, spool.ReportPrefix) || strings.HasPrefix(name, spool.DeclPrefix) || strings.HasPrefix(name, spool.BriefPrefix) {
		b, err = bundle.Seal(payload, c, s.key, s.to)
	} else {
		b, err = bundle.Sign(payload, c, s.key)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fill puts a bundle under every name into sp and returns the bytes put.
func (s *signer) fill(t testing.TB, sp spool.Spool, names ...string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, n := range names {
		out[n] = s.bundle(t, n, 100+len(n)*7)
		if err := sp.Put(context.Background(), n, out[n]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func newDir(t testing.TB) *spool.Dir {
	t.Helper()
	d, err := spool.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// contents reads every object of sp.
func contents(t testing.TB, sp spool.Spool) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := sp.List(context.Background(), "", func(i spool.Info) error {
		data, err := sp.Get(context.Background(), i.Name, spoolcheck.MaxObject)
		out[i.Name] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameContents(t testing.TB, what string, got, want map[string][]byte) {
	t.Helper()
	for n, w := range want {
		if g, ok := got[n]; !ok {
			t.Errorf("%s: %s is missing", what, n)
		} else if !bytes.Equal(g, w) {
			t.Errorf("%s: %s has %d bytes, not the %d expected", what, n, len(g), len(w))
		}
	}
	for n := range got {
		if _, ok := want[n]; !ok {
			t.Errorf("%s: unexpected object %s", what, n)
		}
	}
}

func merged(ms ...map[string][]byte) map[string][]byte {
	out := map[string][]byte{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

var checked = spool.SyncOptions{Validate: spoolcheck.Object, MaxObject: spoolcheck.MaxObject}

func TestSyncCopiesWhatIsMissing(t *testing.T) {
	s := newSigner(t)
	src, dst := newDir(t), newDir(t)
	both := s.fill(t, src, "mesh/keys", spool.CommitName(1), spool.DeclName(1, "run1", "node1"))
	for n, b := range both {
		if err := dst.Put(t.Context(), n, b); err != nil {
			t.Fatal(err)
		}
	}
	onlySrc := s.fill(t, src, spool.CommitName(2), spool.DeclName(2, "run2", "node1"), spool.DeclName(2, "run2", "node2"))
	onlyDst := s.fill(t, dst, spool.ReportName("node1", 1, 1), spool.BriefName("node2", 1))
	var progress []spool.SyncProgress
	opts := checked
	opts.Progress = func(p spool.SyncProgress) { progress = append(progress, p) }
	res, err := spool.Sync(t.Context(), src, dst, opts)
	if err != nil {
		t.Fatal(err)
	}
	var bytesCopied int64
	for _, b := range onlySrc {
		bytesCopied += int64(len(b))
	}
	if res.Copied != 3 || res.Skipped != 3 || res.Bytes != bytesCopied || len(res.Conflicts)+len(res.Damaged) != 0 {
		t.Errorf("Sync = %+v, want 3 copied (%d bytes), 3 skipped", res, bytesCopied)
	}
	sameContents(t, "destination", contents(t, dst), merged(both, onlySrc, onlyDst))
	sameContents(t, "source (must not change)", contents(t, src), merged(both, onlySrc))
	// The commit and mesh keys present on both sides are compared by
	// content as two directories are walked, before anything is copied:
	// progress counts the three copies.
	if len(progress) != 3 || progress[2].Done != 3 || progress[2].Total != 3 || progress[2].Bytes != bytesCopied {
		t.Errorf("progress calls %+v, want 3 ending at 3 of 3 with %d bytes", progress, bytesCopied)
	}
	// Idempotent: nothing left to do.
	res, err = spool.Sync(t.Context(), src, dst, checked)
	if err != nil || res.Copied != 0 || res.Skipped != 6 {
		t.Errorf("second Sync = %+v, %v; want nothing copied, 6 skipped", res, err)
	}
}

// TestSyncMergesBothWays is the sneakernet round trip: the site wrote
// reports into its copy while the mesh declared a new generation; syncing
// both ways leaves both with the union and nothing lost.
func TestSyncMergesBothWays(t *testing.T) {
	s := newSigner(t)
	mesh, site := newDir(t), newDir(t)
	common := s.fill(t, mesh, "mesh/keys", spool.CommitName(1), spool.DeclName(1, "r1", "n1"), spool.DeclName(1, "r1", "n2"))
	for n, b := range common {
		site.Put(t.Context(), n, b)
	}
	meshNew := s.fill(t, mesh, spool.DeclName(2, "r2", "n1"), spool.DeclName(2, "r2", "n2"), spool.CommitName(2), spool.BriefName("n3", 1))
	siteNew := s.fill(t, site, spool.ReportName("n1", 1, 1), spool.ReportName("n2", 1, 1), spool.ReportName("n2", 1, 2))
	if _, err := spool.Sync(t.Context(), mesh, site, checked); err != nil {
		t.Fatal(err)
	}
	if _, err := spool.Sync(t.Context(), site, mesh, checked); err != nil {
		t.Fatal(err)
	}
	want := merged(common, meshNew, siteNew)
	sameContents(t, "mesh copy", contents(t, mesh), want)
	sameContents(t, "site copy", contents(t, site), want)
}

func TestSyncConflicts(t *testing.T) {
	s := newSigner(t)
	// Reports: large objects, compared by size unless Check is set.
	tok1 := spool.ReportName("0123456789abcdef0123456789abcdef", 1, 1)
	tok2 := spool.ReportName("0123456789abcdef0123456789abcdef", 1, 2)
	tok3 := spool.ReportName("0123456789abcdef0123456789abcdef", 1, 3)
	src, dst := newDir(t), newDir(t)
	a := s.bundle(t, tok1, 500)
	b := s.bundle(t, tok1, 500) // same size, other bytes
	c := s.bundle(t, tok2, 500)
	d := s.bundle(t, tok2, 900) // other size
	src.Put(t.Context(), tok1, a)
	dst.Put(t.Context(), tok1, b)
	src.Put(t.Context(), tok2, c)
	dst.Put(t.Context(), tok2, d)
	fresh := s.fill(t, src, tok3)

	// By size only, tok2 conflicts; tok1 is assumed equal.
	res, err := spool.Sync(t.Context(), src, dst, checked)
	if !errors.Is(err, spool.ErrConflict) || !strings.Contains(err.Error(), "1 object differs") {
		t.Errorf("Sync with a conflict: %v, want ErrConflict for 1 object", err)
	}
	if names := issueNames(res.Conflicts); !slices.Equal(names, []string{tok2}) {
		t.Errorf("conflicts by size = %v, want only tok2", names)
	}
	if res.Copied != 1 {
		t.Errorf("a conflict stopped other copies: %+v", res)
	}
	// --check compares content: tok1 conflicts too.
	opts := checked
	opts.Check = true
	res, err = spool.Sync(t.Context(), src, dst, opts)
	if !errors.Is(err, spool.ErrConflict) {
		t.Errorf("Sync --check: %v, want ErrConflict", err)
	}
	if names := issueNames(res.Conflicts); !slices.Equal(names, []string{tok1, tok2}) {
		t.Errorf("conflicts with Check = %v, want tok1 and tok2", names)
	}
	for _, c := range res.Conflicts {
		if !strings.Contains(c.Detail, src.String()) || !strings.Contains(c.Detail, dst.String()) {
			t.Errorf("conflict detail %q does not name both spools", c.Detail)
		}
	}
	// Never resolved: both sides keep their bytes.
	sameContents(t, "destination", contents(t, dst), map[string][]byte{tok1: b, tok2: d, tok3: fresh[tok3]})
	sameContents(t, "source", contents(t, src), merged(map[string][]byte{tok1: a, tok2: c}, fresh))
}

// Two different commits of one generation have the same size: sync
// compares commits (and the other small objects that decide a generation or
// the mesh) by content even without Check, so the fork is a conflict, named,
// and neither side changes.
func TestSyncComparesCommitsByContent(t *testing.T) {
	s := newSigner(t)
	src, dst := newDir(t), newDir(t)
	for _, name := range []string{spool.CommitName(4), spool.ManifestName(4, "0123456789abcdef"), spool.MeshKeysName, spool.RepoIndexPrefix + spool.SeqName(1), spool.AdmitName("tok1")} {
		a, b := s.bundle(t, name, 300), s.bundle(t, name, 300)
		if len(a) != len(b) || bytes.Equal(a, b) {
			t.Fatalf("%s: want two bundles of one size, %d and %d bytes", name, len(a), len(b))
		}
		src.Put(t.Context(), name, a)
		dst.Put(t.Context(), name, b)
		res, err := spool.Sync(t.Context(), src, dst, checked)
		if !errors.Is(err, spool.ErrConflict) || !slices.Equal(issueNames(res.Conflicts), []string{name}) {
			t.Errorf("%s: Sync = %+v, %v; want it named as a conflict", name, res, err)
		}
		if got := contents(t, dst)[name]; !bytes.Equal(got, b) {
			t.Errorf("%s: the destination's copy was replaced", name)
		}
		src.Delete(t.Context(), name)
		dst.Delete(t.Context(), name)
	}
	// Equal content is no conflict.
	c := s.bundle(t, spool.CommitName(5), 300)
	src.Put(t.Context(), spool.CommitName(5), c)
	dst.Put(t.Context(), spool.CommitName(5), c)
	if res, err := spool.Sync(t.Context(), src, dst, checked); err != nil || res.Skipped != 1 {
		t.Errorf("equal commits: %+v, %v", res, err)
	}
}

func issueNames(is []spool.SyncIssue) []string {
	var out []string
	for _, i := range is {
		out = append(out, i.Name)
	}
	return out
}

// copyTree copies a directory spool file by file, as cp -a to a USB stick
// does.
func copyTree(t testing.TB, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		target := filepath.Join(to, rel)
		if e.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o444)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestSyncRefusesTruncatedObjects: a USB copy of the spool in which one
// declaration was cut short (the stick was pulled during the copy). Sync
// from the stick must not spread the damage: the truncated object is
// reported and not copied, and the commit of its generation is held back
// so no host sees a generation with a missing declaration.
func TestSyncRefusesTruncatedObjects(t *testing.T) {
	s := newSigner(t)
	mesh := newDir(t)
	objs := s.fill(t, mesh, "mesh/keys", spool.DeclName(7, "r7", "n1"), spool.DeclName(7, "r7", "n2"), spool.CommitName(7), spool.BriefName("n1", 3))
	usb, err := spool.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	copyTree(t, mesh.Path(), usb.Path())
	bad := spool.DeclName(7, "r7", "n2")
	file := filepath.Join(usb.Path(), filepath.FromSlash(bad))
	if err := os.Truncate(file, int64(len(objs[bad])-40)); err != nil {
		t.Fatal(err)
	}
	site := newDir(t)
	res, err := spool.Sync(t.Context(), usb, site, checked)
	if !errors.Is(err, spool.ErrDamaged) || errors.Is(err, spool.ErrConflict) {
		t.Fatalf("Sync from a stick with a truncated object: %v, want ErrDamaged", err)
	}
	if names := issueNames(res.Damaged); !slices.Equal(names, []string{spool.CommitName(7), bad}) {
		t.Errorf("damaged = %v, want the truncated declaration and its held-back commit", res.Damaged)
	}
	for _, d := range res.Damaged {
		if d.Name == bad && !strings.Contains(d.Detail, "truncated") {
			t.Errorf("damage detail %q does not say the object is truncated", d.Detail)
		}
	}
	got := contents(t, site)
	if _, ok := got[bad]; ok {
		t.Error("the truncated object was copied")
	}
	if _, ok := got[spool.CommitName(7)]; ok {
		t.Error("the commit of a generation with a missing declaration was copied")
	}
	want := merged(objs)
	delete(want, bad)
	delete(want, spool.CommitName(7))
	sameContents(t, "site", got, want)

	// Once the object is copied again whole, sync completes.
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if err := usb.Put(t.Context(), bad, objs[bad]); err != nil {
		t.Fatal(err)
	}
	if res, err := spool.Sync(t.Context(), usb, site, checked); err != nil || res.Copied != 2 {
		t.Fatalf("Sync after repairing the stick = %+v, %v; want the object and the commit copied", res, err)
	}
	sameContents(t, "site after repair", contents(t, site), objs)
}

// TestSyncConflictSaysWhichCopyIsDamaged: the destination holds a
// truncated copy of an object the source has whole.
func TestSyncConflictSaysWhichCopyIsDamaged(t *testing.T) {
	s := newSigner(t)
	src, dst := newDir(t), newDir(t)
	objs := s.fill(t, src, spool.ReportName("n1", 1, 1))
	name := spool.ReportName("n1", 1, 1)
	dst.Put(t.Context(), name, objs[name][:len(objs[name])/2])
	res, err := spool.Sync(t.Context(), src, dst, checked)
	if !errors.Is(err, spool.ErrConflict) || len(res.Conflicts) != 1 {
		t.Fatalf("Sync = %+v, %v; want one conflict", res, err)
	}
	if d := res.Conflicts[0].Detail; !strings.Contains(d, "the copy in "+dst.String()+" is damaged") {
		t.Errorf("conflict detail %q does not say the destination's copy is damaged", d)
	}
}

func TestSyncNeverCopiesTempFiles(t *testing.T) {
	s := newSigner(t)
	src, dst := newDir(t), newDir(t)
	want := s.fill(t, src, "mesh/keys")
	for _, junk := range []string{".muster-tmp-0123456789abcdef", ".mesh.keys.Xa1b2c", "report/.partial"} {
		p := filepath.Join(src.Path(), filepath.FromSlash(junk))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte("half an object"), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := spool.Sync(t.Context(), src, dst, checked); err != nil {
		t.Fatal(err)
	}
	sameContents(t, "destination", contents(t, dst), want)
	err := filepath.WalkDir(dst.Path(), func(p string, e fs.DirEntry, err error) error {
		if strings.HasPrefix(e.Name(), ".") && p != dst.Path() {
			t.Errorf("sync left %s in the destination", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestSyncDryRun(t *testing.T) {
	s := newSigner(t)
	src, dst := newDir(t), newDir(t)
	s.fill(t, src, "mesh/keys", spool.CommitName(1))
	opts := checked
	opts.DryRun = true
	res, err := spool.Sync(t.Context(), src, dst, opts)
	if err != nil || res.Copied != 2 {
		t.Errorf("dry run = %+v, %v; want 2 to copy", res, err)
	}
	if got := contents(t, dst); len(got) != 0 {
		t.Errorf("dry run wrote %d objects", len(got))
	}
}

// recorder is a destination that records the order of Puts.
type recorder struct {
	spool.Spool
	mu   sync.Mutex
	puts []string
}

func (r *recorder) Put(ctx context.Context, name string, data []byte) error {
	r.mu.Lock()
	r.puts = append(r.puts, name)
	r.mu.Unlock()
	return r.Spool.Put(ctx, name, data)
}

func TestSyncCopiesCommitsLast(t *testing.T) {
	s := newSigner(t)
	src := newDir(t)
	var names []string
	for g := uint64(1); g <= 5; g++ {
		names = append(names, spool.CommitName(g))
		for n := range 6 {
			names = append(names, spool.DeclName(g, "run", fmt.Sprintf("node%d", n)))
		}
	}
	s.fill(t, src, names...)
	dst := &recorder{Spool: newDir(t)}
	if _, err := spool.Sync(t.Context(), src, dst, checked); err != nil {
		t.Fatal(err)
	}
	firstCommit := slices.IndexFunc(dst.puts, func(n string) bool { return strings.HasPrefix(n, spool.CommitPrefix) })
	for i, n := range dst.puts[firstCommit:] {
		if !strings.HasPrefix(n, spool.CommitPrefix) {
			t.Fatalf("put %d is %s, after commit %s", firstCommit+i, n, dst.puts[firstCommit])
		}
	}
	if len(dst.puts) != len(names) {
		t.Errorf("%d puts, want %d", len(dst.puts), len(names))
	}
}

// lossy is a destination whose Put drops the last byte and says nothing:
// the read-back must catch it.
type lossy struct{ spool.Spool }

func (l lossy) Put(ctx context.Context, name string, data []byte) error {
	return l.Spool.Put(ctx, name, data[:len(data)-1])
}

func TestSyncVerifiesWhatItCopied(t *testing.T) {
	s := newSigner(t)
	src := newDir(t)
	s.fill(t, src, "mesh/keys")
	_, err := spool.Sync(t.Context(), src, lossy{newDir(t)}, checked)
	if err == nil || !strings.Contains(err.Error(), "verify mesh/keys") {
		t.Errorf("Sync to a store that loses bytes: %v, want a verification error naming the object", err)
	}
}

// TestSyncResumes interrupts a sync part way and runs it again: the second
// run copies only what is missing, and everything arrives whole.
func TestSyncResumes(t *testing.T) {
	s := newSigner(t)
	src, dst := newDir(t), newDir(t)
	var names []string
	for i := range 80 {
		names = append(names, spool.ReportName(fmt.Sprintf("n%d", i%4), uint64(i), 1))
	}
	want := s.fill(t, src, names...)
	ctx, cancel := context.WithCancel(t.Context())
	opts := checked
	opts.Workers = 4
	opts.Progress = func(p spool.SyncProgress) {
		if p.Done == 30 {
			cancel()
		}
	}
	res, err := spool.Sync(ctx, src, dst, opts)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted Sync: %v, want context.Canceled", err)
	}
	first := res.Copied
	if first < 30 || first >= len(names) {
		t.Fatalf("interrupted Sync copied %d objects, want 30 or a few more", first)
	}
	res, err = spool.Sync(t.Context(), src, dst, checked)
	if err != nil {
		t.Fatal(err)
	}
	// Objects put but not yet read back when the sync was interrupted
	// count as present now.
	if res.Copied+res.Skipped != len(names) || res.Skipped < first {
		t.Errorf("resumed Sync copied %d and skipped %d, after %d; want %d in all", res.Copied, res.Skipped, first, len(names))
	}
	sameContents(t, "destination", contents(t, dst), want)
}

// TestSyncS3StoreGoesAway stops the object store in the middle of a sync to
// it: the sync fails with a temporary error; after the store is back, a
// second sync copies the rest, and every object arrives whole.
func TestSyncS3StoreGoesAway(t *testing.T) {
	srv := s3server.Start(t)
	s := newSigner(t)
	src := newDir(t)
	var names []string
	for i := range 60 {
		names = append(names, spool.ReportName(fmt.Sprintf("n%d", i%5), uint64(i), 1))
	}
	names = append(names, spool.CommitName(1), "mesh/keys")
	want := s.fill(t, src, names...)
	dst := s3Spool(t, srv, "fault")
	var stopped atomic.Bool
	opts := checked
	opts.Progress = func(p spool.SyncProgress) {
		if p.Done >= 20 && !stopped.Swap(true) {
			srv.Stop()
		}
	}
	res, err := spool.Sync(t.Context(), src, dst, opts)
	if !errors.Is(err, spool.ErrUnavailable) || fault.ClassOf(err) != fault.Temporary {
		t.Fatalf("Sync with the store stopped: %+v, %v (class %v); want a temporary ErrUnavailable", res, err, fault.ClassOf(err))
	}
	if !strings.Contains(err.Error(), srv.Endpoint()) {
		t.Errorf("error %q does not name the store", err)
	}
	first := res.Copied
	if first < 20 || first >= len(names) {
		t.Fatalf("Sync copied %d objects before failing, want at least 20 and not all", first)
	}
	srv.Restart()
	res, err = spool.Sync(t.Context(), src, dst, checked)
	if err != nil {
		t.Fatalf("Sync after the store came back: %v", err)
	}
	// Objects whose PUT was in flight when the store died may have landed;
	// those count as present now.
	if res.Copied+res.Skipped != len(names) || res.Copied > len(names)-first {
		t.Errorf("resumed Sync = %+v after %d copied, want the other %d", res, first, len(names)-first)
	}
	sameContents(t, "object store", contents(t, dst), want)

	// And back: S3 to a directory.
	back := newDir(t)
	if res, err := spool.Sync(t.Context(), dst, back, checked); err != nil || res.Copied != len(names) {
		t.Fatalf("Sync from the store = %+v, %v", res, err)
	}
	sameContents(t, "directory from the store", contents(t, back), want)
}
