package spoolcheck_test

import (
	"bytes"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/internal/keys"
	"github.com/muster-tool/muster/internal/mesh"
	"github.com/muster-tool/muster/internal/spoolcheck"
	"github.com/muster-tool/muster/internal/testutil/s3server"
	"github.com/muster-tool/muster/spool"
)

type maker struct {
	pair *keys.Pair
	key  ed25519.PrivateKey
	to   age.Recipient
}

func newMaker(t *testing.T) *maker {
	pair, err := keys.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return &maker{pair, pair.Sign, pair.Age.Recipient()}
}

// meshKeys is a real mesh/keys object publishing the maker's keys.
func (m *maker) meshKeys(t *testing.T) []byte {
	t.Helper()
	b, err := bundle.SignTOML(mesh.Published{Keys: m.pair.Public(), Created: time.Now().UTC()}, bundle.Context{Kind: "mesh-keys", Name: spool.MeshKeysName}, m.key)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// commit is a real commit of generation gen following prev (nil: the
// first), signed by key.
func (m *maker) commit(t *testing.T, key ed25519.PrivateKey, gen uint64, prev *generation.Commit, run string) (*generation.Commit, []byte) {
	t.Helper()
	c := generation.Commit{Version: generation.CommitVersion, Generation: gen, Run: run, DeclaredAt: time.Now().UTC()}
	if prev != nil {
		c.Previous, c.PreviousGeneration = prev.Digest, prev.Generation
	}
	b, err := bundle.SignTOML(c, generation.CommitCtx(gen), key)
	if err != nil {
		t.Fatal(err)
	}
	c.Digest = generation.Digest(b)
	return &c, b
}

func (m *maker) signed(t *testing.T, name string) []byte {
	t.Helper()
	b, err := bundle.Sign([]byte("payload of "+name), bundle.Context{Kind: "test", Name: name}, m.key)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (m *maker) sealed(t *testing.T, name string) []byte {
	t.Helper()
	b, err := bundle.Seal(bytes.Repeat([]byte("secret "), 100), bundle.Context{Kind: "test", Name: name}, m.key, m.to)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestObject(t *testing.T) {
	m := newMaker(t)
	commit := spool.CommitName(3)
	report := spool.ReportName("n1", 3, 1)
	signed, sealed := m.signed(t, commit), m.sealed(t, report)
	flipped := bytes.Clone(signed)
	flipped[len(flipped)-10] ^= 1
	for _, tc := range []struct {
		what, name string
		data       []byte
		kind       string // "" for no problem
	}{
		{"whole signed bundle", commit, signed, ""},
		{"whole sealed bundle", report, sealed, ""},
		{"signed bundle cut short", commit, signed[:len(signed)-1], spoolcheck.Damaged},
		{"sealed bundle cut short", report, sealed[:len(sealed)-100], spoolcheck.Damaged},
		{"sealed bundle cut in its header line", report, sealed[:10], spoolcheck.Damaged},
		{"padded", report, append(bytes.Clone(sealed), 0), spoolcheck.Damaged},
		{"empty", report, nil, spoolcheck.Damaged},
		{"not a bundle", report, []byte("hello\n"), spoolcheck.Damaged},
		{"signed bundle with a flipped byte", commit, flipped, spoolcheck.Damaged},
		{"signed for another object", spool.CommitName(4), signed, spoolcheck.Misfiled},
		{"package repository file", spool.RepoPrefix + "dists/stable/Release", []byte("not a bundle"), ""},
	} {
		err := spoolcheck.Object(tc.name, tc.data)
		switch {
		case tc.kind == "" && err != nil:
			t.Errorf("%s: %v, want no problem", tc.what, err)
		case tc.kind != "" && err == nil:
			t.Errorf("%s: no problem found, want %s", tc.what, tc.kind)
		case tc.kind != "":
			p := problems(t, tc.name, tc.data)
			if p != tc.kind {
				t.Errorf("%s: kind %s, want %s (%v)", tc.what, p, tc.kind, err)
			}
		}
	}
}

// problems runs Verify on a one-object spool and returns the kind found.
func problems(t *testing.T, name string, data []byte) string {
	t.Helper()
	d, err := spool.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Put(t.Context(), name, data); err != nil {
		t.Fatal(err)
	}
	rep, err := spoolcheck.Verify(t.Context(), d, spoolcheck.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 1 {
		t.Fatalf("Verify found %v, want one problem", rep.Problems)
	}
	return rep.Problems[0].Kind
}

func TestLayout(t *testing.T) {
	gen := spool.GenerationName(12)
	for _, tc := range []struct {
		name string
		kind string
	}{
		{"mesh/keys", ""},
		{spool.TokenName("tok1"), ""},
		{spool.JoinName("tok1", "hostfp"), ""},
		{spool.AdmitName("tok1"), ""},
		{spool.RefusedName("tok1", "hostfp"), ""},
		{spool.RevokeName("node1"), ""},
		{spool.BriefName("node1", 4), ""},
		{spool.DeclName(12, "run1", "node1"), ""},
		{spool.ManifestName(12, "run1"), ""},
		{spool.CommitName(12), ""},
		{spool.ReportName("node1", 12, 2), ""},
		{spool.RepoPrefix + "pool/m/muster_1.0_amd64.deb", ""},
		{"mesh/other", spoolcheck.UnknownPrefix},
		{"notes/todo", spoolcheck.UnknownPrefix},
		{"commit", spoolcheck.UnknownPrefix},
		{"commit/12", spoolcheck.BadLayout},
		{"commit/" + gen + "/x", spoolcheck.BadLayout},
		{"decl/" + gen + "/run1", spoolcheck.BadLayout},
		{"decl/twelve/run1/node1", spoolcheck.BadLayout},
		{"report/node1/" + gen, spoolcheck.BadLayout},
		{"report/node1/" + gen + "-1", spoolcheck.BadLayout},
		{"brief/node1", spoolcheck.BadLayout},
		{"enrol/admit/tok1/x", spoolcheck.BadLayout},
		{"manifest/1/run1", spoolcheck.BadLayout},
		{"Commit/x", spoolcheck.BadLayout},
	} {
		err := spoolcheck.Layout(tc.name)
		switch {
		case tc.kind == "" && err != nil:
			t.Errorf("Layout(%q): %v, want none", tc.name, err)
		case tc.kind != "" && err == nil:
			t.Errorf("Layout(%q): no problem, want %s", tc.name, tc.kind)
		}
	}
}

// TestVerifyDirectorySpool damages a directory spool in every way a copy
// can be damaged and checks that each is reported once, naming the
// object, and that nothing whole is reported.
func TestVerifyDirectorySpool(t *testing.T) {
	m := newMaker(t)
	d, err := spool.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	put := func(name string, data []byte) {
		if err := d.Put(t.Context(), name, data); err != nil {
			t.Fatal(err)
		}
	}
	put("mesh/keys", m.meshKeys(t))
	_, c1 := m.commit(t, m.key, 1, nil, "r1")
	put(spool.CommitName(1), c1)
	put(spool.DeclName(1, "r1", "n1"), m.sealed(t, spool.DeclName(1, "r1", "n1")))
	put(spool.ReportName("n1", 1, 1), m.sealed(t, spool.ReportName("n1", 1, 1)))
	truncated := spool.ReportName("n1", 1, 2)
	whole := m.sealed(t, truncated)
	put(truncated, whole[:len(whole)/2])
	put("scratch/notes", m.signed(t, "scratch/notes"))
	root := d.Path()
	write := func(rel string, age time.Duration) {
		p := filepath.Join(root, filepath.FromSlash(rel))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
		at := time.Now().Add(-age)
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
	}
	write(".muster-tmp-00000000deadbeef", 2*time.Hour) // left behind
	write(".muster-tmp-00000000cafef00d", time.Minute) // a write in progress
	write("report/n1/.00000000000000000001-00000000000000000003.Xy12ab", 0)
	write("Report/n1/x", 0)
	if err := os.Symlink("/etc/passwd", filepath.Join(root, "report", "n1", "link")); err != nil {
		t.Fatal(err)
	}
	rep, err := spoolcheck.Verify(t.Context(), d, spoolcheck.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"temp-file .muster-tmp-00000000deadbeef",
		"stray Report",
		"stray report/n1/.00000000000000000001-00000000000000000003.Xy12ab",
		"damaged " + truncated,
		"stray report/n1/link",
		"unknown-prefix scratch/notes",
	}
	var got []string
	for _, p := range rep.Problems {
		got = append(got, p.Kind+" "+p.Object)
		if p.Detail == "" {
			t.Errorf("problem %s %s has no detail", p.Kind, p.Object)
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Verify found:\n\t%s\nwant:\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
	if rep.Objects != 6 {
		t.Errorf("Verify counted %d objects, want 6", rep.Objects)
	}
}

// The story: a stray commit with a high generation, signed by another key,
// is dropped into a shared spool, and two copies of one mesh's spool that
// each grew a generation 3 are merged. Verify lists the junk as foreign and
// names the fork; it deletes nothing.
func TestVerifyNamesForeignObjectsAndForks(t *testing.T) {
	m := newMaker(t)
	rogue := newMaker(t)
	d, err := spool.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	put := func(name string, data []byte) {
		if err := d.Put(t.Context(), name, data); err != nil {
			t.Fatal(err)
		}
	}
	put(spool.MeshKeysName, m.meshKeys(t))
	c1, b1 := m.commit(t, m.key, 1, nil, "r1")
	c2, b2 := m.commit(t, m.key, 2, c1, "r2")
	_, b3 := m.commit(t, m.key, 3, c2, "r3")
	other3, _ := m.commit(t, m.key, 3, c2, "r3-other-copy")
	_, b4 := m.commit(t, m.key, 4, other3, "r4-other-copy")
	_, junk := m.commit(t, rogue.key, 99999, c2, "junk")
	for g, b := range map[uint64][]byte{1: b1, 2: b2, 3: b3, 4: b4, 99999: junk} {
		put(spool.CommitName(g), b)
	}
	index := spool.RepoIndexPrefix + spool.SeqName(7)
	put(index, rogue.signed(t, index))
	rep, err := spoolcheck.Verify(t.Context(), d, spoolcheck.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range rep.Problems {
		got = append(got, p.Kind+" "+p.Object)
	}
	want := []string{
		"fork " + spool.CommitName(4),
		"foreign " + spool.CommitName(99999),
		"foreign " + index,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("Verify found:\n\t%s\nwant:\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
	fork := rep.Problems[0].Detail
	for _, w := range []string{generation.ShortDigest(other3.Digest), "generation 3", "two histories"} {
		if !strings.Contains(fork, w) {
			t.Errorf("fork detail %q does not say %q", fork, w)
		}
	}
	if _, err := d.Stat(t.Context(), spool.CommitName(99999)); err != nil {
		t.Errorf("verify removed the junk: %v", err)
	}
	// Without mesh/keys, nothing can be checked against the mesh's key,
	// and verify says so instead of passing it.
	if err := d.Delete(t.Context(), spool.MeshKeysName); err != nil {
		t.Fatal(err)
	}
	rep, _ = spoolcheck.Verify(t.Context(), d, spoolcheck.Options{})
	if len(rep.Problems) != 1 || rep.Problems[0].Kind != spoolcheck.NoMeshKeys {
		t.Errorf("without mesh/keys: %v", rep.Problems)
	}
}

func TestVerifyS3Spool(t *testing.T) {
	srv := s3server.Start(t)
	srv.SetEnv(t)
	sp, err := spool.Open(srv.URL("verify"))
	if err != nil {
		t.Fatal(err)
	}
	m := newMaker(t)
	ok := spool.ReportName("n1", 1, 1)
	bad := spool.ReportName("n1", 1, 2)
	sp.Put(t.Context(), ok, m.sealed(t, ok))
	sp.Put(t.Context(), bad, m.sealed(t, bad)[:200])
	rep, err := spoolcheck.Verify(t.Context(), sp, spoolcheck.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 1 || rep.Problems[0].Object != bad || rep.Problems[0].Kind != spoolcheck.Damaged {
		t.Errorf("Verify = %+v, want %s damaged", rep.Problems, bad)
	}
}
