package repo

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/resource/debian"
	"github.com/muster-tool/muster/internal/testutil/aptrepo"
	"github.com/muster-tool/muster/spool"
)

const testPkg = "muster-test-repo"

func pkg(version string) aptrepo.Pkg {
	return aptrepo.Pkg{Name: testPkg, Version: version, Files: map[string]string{"/usr/share/" + testPkg + "/v": version + "\n"}}
}

type fixture struct {
	sp   *spool.Dir
	sign ed25519.PrivateKey
	pub  ed25519.PublicKey
}

// The test packages are built once per test binary run: dpkg-deb is the
// slow part.
var (
	built     aptrepo.Repo
	rebuilt   aptrepo.Repo
	buildOnce sync.Once
	buildDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

func debs(t *testing.T) {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "muster-repo-test-")
		if err != nil {
			t.Fatal(err)
		}
		buildDir = dir
		var ps []aptrepo.Pkg
		for _, v := range []string{"1.0", "1:2.0~rc1+B1", "2.0", "3.0", "4.0"} {
			ps = append(ps, pkg(v))
		}
		built = aptrepo.Build(t, filepath.Join(dir, "a"), ps)
		rebuilt = aptrepo.Build(t, filepath.Join(dir, "b"), []aptrepo.Pkg{
			{Name: testPkg, Version: "1.0", Files: map[string]string{"/usr/share/" + testPkg + "/v": "rebuilt\n"}},
		})
	})
	if built.Dir == "" {
		t.Fatal("building the test packages failed in an earlier test")
	}
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	debs(t)
	sp, err := spool.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pub, sign, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{sp: sp, sign: sign, pub: pub}
}

func (f *fixture) read(t *testing.T, p aptrepo.Pkg) *Deb {
	t.Helper()
	d, err := ReadDeb(context.Background(), built.DebPath(p))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func (f *fixture) add(t *testing.T, ps ...aptrepo.Pkg) *AddResult {
	t.Helper()
	var ds []*Deb
	for _, p := range ps {
		ds = append(ds, f.read(t, p))
	}
	res, err := Add(context.Background(), f.sp, f.sign, ds, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func objects(t *testing.T, sp spool.Spool) []string {
	t.Helper()
	var names []string
	if err := sp.List(context.Background(), spool.RepoPrefix, func(i spool.Info) error {
		names = append(names, i.Name)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return names
}

// aptFor returns a package backend for a fresh scratch root whose only
// source is the repository materialized in dir.
func aptFor(t *testing.T, dir string) *debian.Apt {
	t.Helper()
	root := t.TempDir()
	if err := debian.PrepareRoot(root); err != nil {
		t.Fatal(err)
	}
	etc := t.TempDir()
	list := filepath.Join(etc, "sources.list")
	if err := os.WriteFile(list, []byte(SourcesLine(dir)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return debian.New(root, debian.Options{Update: true, Config: []string{
		"Dir::Etc::sourcelist=" + list,
		"Dir::Etc::sourceparts=" + filepath.Join(etc, "none"),
		"Acquire::Languages=none",
		"APT::Sandbox::User=root",
	}})
}

// The whole path an air-gapped site depends on: packages added on the
// mesh side travel in the spool, are materialized and verified on the
// host, and real apt installs the exact versions from there, including a
// version whose characters object names cannot hold.
func TestAddMaterializeInstall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	v1, v2 := pkg("1.0"), pkg("1:2.0~rc1+B1")
	f := newFixture(t)
	res := f.add(t, v1, v2)
	if res.Index != 1 || len(res.Packages) != 2 || res.Packages[0].Present || res.Packages[1].Present {
		t.Fatalf("first add: %+v", res)
	}
	want := []string{
		"repo/index/00000000000000000001",
		"repo/pool/muster-test-repo/1.0_all.deb",
		"repo/pool/muster-test-repo/1_3a2.0_7erc1_2b_421_all.deb",
	}
	if got := objects(t, f.sp); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("spool holds %v, want %v", got, want)
	}

	dir := filepath.Join(t.TempDir(), "repo")
	changed, _, err := Materialize(ctx, f.sp, f.pub, dir)
	if err != nil || !changed {
		t.Fatalf("Materialize = %v, %v; want changed", changed, err)
	}
	index, err := os.ReadFile(filepath.Join(dir, PackagesFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"Package: muster-test-repo\nVersion: 1:2.0~rc1+B1\n", "Filename: ./pool/muster-test-repo/1.0_all.deb\nSize: ", "SHA256: " + f.read(t, v2).SHA256 + "\n"} {
		if !strings.Contains(string(index), w) {
			t.Errorf("Packages lacks %q:\n%s", w, index)
		}
	}
	if changed, _, err := Materialize(ctx, f.sp, f.pub, dir); err != nil || changed {
		t.Errorf("second Materialize = %v, %v; want no change", changed, err)
	}

	apt := aptFor(t, dir)
	for _, v := range []string{"1:2.0~rc1+B1", "1.0"} {
		if err := apt.Install(ctx, map[string]string{testPkg: v}); err != nil {
			t.Fatalf("install %s from the materialized repository: %v", v, err)
		}
		got, err := apt.Installed(ctx, []string{testPkg})
		if err != nil || got[testPkg] != v {
			t.Fatalf("installed %v (%v), want %s", got, err, v)
		}
	}
}

// Adding what is there changes nothing; a rebuilt package under a
// published version is refused and leaves the spool as it was.
func TestAddOnce(t *testing.T) {
	t.Parallel()
	v1 := pkg("1.0")
	f := newFixture(t)
	f.add(t, v1)
	before := objects(t, f.sp)

	again := f.add(t, v1)
	if again.Index != 1 || !again.Packages[0].Present {
		t.Errorf("adding a present package: %+v, want present in index 1", again)
	}
	d, err := ReadDeb(context.Background(), filepath.Join(rebuilt.Dir, "muster-test-repo_1.0_all.deb"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Add(context.Background(), f.sp, f.sign, []*Deb{d}, time.Now())
	if err == nil || !strings.Contains(err.Error(), "already in the repository with different content") {
		t.Fatalf("rebuilt 1.0: err = %v", err)
	}
	if !strings.Contains(fault.HintOf(err), "new version") {
		t.Errorf("hint %q does not say to bump the version", fault.HintOf(err))
	}
	if after := objects(t, f.sp); strings.Join(after, " ") != strings.Join(before, " ") {
		t.Errorf("refused add wrote objects: %v → %v", before, after)
	}
}

// Two operators adding at once: each index is written only if absent, so
// the one that loses the race starts again from the winner's index and
// neither package is lost.
func TestConcurrentAddsKeepBoth(t *testing.T) {
	const n = 4
	var ps []aptrepo.Pkg
	for i := range n {
		ps = append(ps, pkg(string(rune('1'+i))+".0"))
	}
	t.Parallel()
	f := newFixture(t)
	debs := make([]*Deb, n)
	for i, p := range ps {
		debs[i] = f.read(t, p)
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = Add(context.Background(), f.sp, f.sign, []*Deb{debs[i]}, time.Now())
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	x, err := ReadIndexes(context.Background(), f.sp, f.pub)
	if err != nil {
		t.Fatal(err)
	}
	if ix := x.Newest; ix.Seq != n || len(ix.Packages) != n {
		t.Errorf("newest index %d lists %d packages, want index %d with all %d", ix.Seq, len(ix.Packages), n, n)
	}
}

// Tampering with the spool copy is refused before apt sees anything: the
// Packages file stays as it was verified last.
func TestMaterializeRefusesTampering(t *testing.T) {
	v1, v2 := pkg("1.0"), pkg("2.0")
	cases := []struct {
		name   string
		tamper func(t *testing.T, f *fixture)
		want   string
	}{
		{"a flipped byte in a package", func(t *testing.T, f *fixture) {
			flip(t, f.sp, ObjectName(testPkg, "2.0", "all"))
		}, "repo/pool/muster-test-repo/2.0_all.deb"},
		{"a package swapped for another", func(t *testing.T, f *fixture) {
			p1 := filepath.Join(f.sp.Path(), filepath.FromSlash(ObjectName(testPkg, "1.0", "all")))
			p2 := filepath.Join(f.sp.Path(), filepath.FromSlash(ObjectName(testPkg, "2.0", "all")))
			data, err := os.ReadFile(p1)
			if err != nil {
				t.Fatal(err)
			}
			os.Remove(p2)
			if err := os.WriteFile(p2, data, 0o444); err != nil {
				t.Fatal(err)
			}
		}, "pool object repo/pool/muster-test-repo/2.0_all.deb"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.add(t, v1)
			dir := t.TempDir()
			if _, _, err := Materialize(context.Background(), f.sp, f.pub, dir); err != nil {
				t.Fatal(err)
			}
			good, _ := os.ReadFile(filepath.Join(dir, PackagesFile))
			f.add(t, v2)
			c.tamper(t, f)
			_, _, err := Materialize(context.Background(), f.sp, f.pub, dir)
			if err == nil || fault.ClassOf(err) != fault.Refused || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v (class %v), want a refusal naming %q", err, fault.ClassOf(err), c.want)
			}
			now, _ := os.ReadFile(filepath.Join(dir, PackagesFile))
			if string(now) != string(good) {
				t.Errorf("Packages changed after a refusal:\n%s", now)
			}
			if _, err := os.Stat(filepath.Join(dir, poolPath(f.read(t, v2).Package))); err == nil {
				t.Error("the refused package was written into the repository")
			}
		})
	}
}

// An index that does not verify is junk anyone able to write to the spool
// could drop there: it is skipped and named, never used and never deleted,
// and the newest index that verifies is materialized. Junk must not stop
// the fleet, which would then fail a line on every host.
func TestMaterializeSkipsJunkIndexes(t *testing.T) {
	v1, v2 := pkg("1.0"), pkg("2.0")
	for _, c := range []struct {
		name   string
		tamper func(t *testing.T, f *fixture)
	}{
		{"an index signed by another key", func(t *testing.T, f *fixture) {
			_, foreign, _ := ed25519.GenerateKey(rand.Reader)
			d := f.read(t, v2)
			// The next index under the foreign key, as a forger writes
			// it.
			forged := &Index{Version: FormatVersion, Seq: 2, Packages: []Package{f.read(t, v1).Package, d.Package}}
			putSigned(t, f.sp, foreign, forged)
		}},
		{"an old index replayed under a newer name", func(t *testing.T, f *fixture) {
			data, err := f.sp.Get(context.Background(), IndexName(1), 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := f.sp.Put(context.Background(), IndexName(2), data); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			f.add(t, v1)
			dir := t.TempDir()
			if _, _, err := Materialize(context.Background(), f.sp, f.pub, dir); err != nil {
				t.Fatal(err)
			}
			good, _ := os.ReadFile(filepath.Join(dir, PackagesFile))
			c.tamper(t, f)
			changed, skipped, err := Materialize(context.Background(), f.sp, f.pub, dir)
			if err != nil || changed {
				t.Fatalf("Materialize past junk: changed %v, %v", changed, err)
			}
			if len(skipped) != 1 || !strings.Contains(skipped[0], IndexName(2)+" skipped") {
				t.Errorf("skipped %q, want index 2 named", skipped)
			}
			if now, _ := os.ReadFile(filepath.Join(dir, PackagesFile)); string(now) != string(good) {
				t.Errorf("Packages changed:\n%s", now)
			}
			if _, err := os.Stat(filepath.Join(dir, poolPath(f.read(t, v2).Package))); err == nil {
				t.Error("a package only the junk index names was written into the repository")
			}
			// The mesh's next add goes past the name the junk holds.
			res, err := Add(context.Background(), f.sp, f.sign, []*Deb{f.read(t, v2)}, time.Now())
			if err != nil || res.Index != 3 {
				t.Fatalf("add after junk: index %v, %v; want 3", res, err)
			}
			if _, _, err := Materialize(context.Background(), f.sp, f.pub, dir); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(dir, poolPath(f.read(t, v2).Package))); err != nil {
				t.Errorf("the mesh's index 3 was not materialized: %v", err)
			}
			if _, err := f.sp.Stat(context.Background(), IndexName(2)); err != nil {
				t.Errorf("the junk was deleted: %v", err)
			}
		})
	}
}

func putSigned(t *testing.T, sp spool.Spool, key ed25519.PrivateKey, ix *Index) {
	t.Helper()
	name := IndexName(ix.Seq)
	data, err := bundle.SignTOML(ix, indexCtx(name), key)
	if err != nil {
		t.Fatal(err)
	}
	if err := sp.Put(context.Background(), name, data); err != nil {
		t.Fatal(err)
	}
}

func flip(t *testing.T, sp *spool.Dir, name string) {
	t.Helper()
	path := filepath.Join(sp.Path(), filepath.FromSlash(name))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-100] ^= 0x40
	os.Chmod(path, 0o644)
	if err := os.WriteFile(path, data, 0o444); err != nil {
		t.Fatal(err)
	}
}

// A spool restored from an older copy does not shrink the host's
// repository; a newer index later adds to it again.
func TestMaterializeKeepsNewerLocalIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	v1, v2, v3 := pkg("1.0"), pkg("2.0"), pkg("3.0")
	f := newFixture(t)
	f.add(t, v1)
	f.add(t, v2)
	dir := t.TempDir()
	if _, _, err := Materialize(ctx, f.sp, f.pub, dir); err != nil {
		t.Fatal(err)
	}
	if err := f.sp.Delete(ctx, IndexName(2)); err != nil {
		t.Fatal(err)
	}
	changed, _, err := Materialize(ctx, f.sp, f.pub, dir)
	if err != nil || changed {
		t.Fatalf("older spool: Materialize = %v, %v; want no change", changed, err)
	}
	index, _ := os.ReadFile(filepath.Join(dir, PackagesFile))
	if !strings.Contains(string(index), "Version: 2.0\n") {
		t.Fatalf("version 2.0 dropped from the repository after the spool lost its index:\n%s", index)
	}
	// The lost index comes back with the next copy, and a newer one
	// follows.
	if _, err := Add(ctx, f.sp, f.sign, []*Deb{f.read(t, v2)}, time.Now()); err != nil {
		t.Fatal(err)
	}
	f.add(t, v3)
	if changed, _, err := Materialize(ctx, f.sp, f.pub, dir); err != nil || !changed {
		t.Fatalf("newer index: Materialize = %v, %v; want changed", changed, err)
	}
	index, _ = os.ReadFile(filepath.Join(dir, PackagesFile))
	if !strings.Contains(string(index), "Version: 3.0\n") {
		t.Errorf("version 3.0 missing:\n%s", index)
	}
}

func TestMaterializeWithoutRepository(t *testing.T) {
	t.Parallel()
	sp, err := spool.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	dir := filepath.Join(t.TempDir(), "repo")
	changed, _, err := Materialize(context.Background(), sp, pub, dir)
	if err != nil || changed {
		t.Fatalf("Materialize = %v, %v", changed, err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a spool without repository created %s", dir)
	}
}

func TestReadDebRefusesOtherFiles(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "x.deb")
	if err := os.WriteFile(path, []byte("!<arch>\nnot really\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadDeb(context.Background(), path); err == nil || !strings.Contains(err.Error(), "is not a Debian package") {
		t.Fatalf("err = %v", err)
	}
}
