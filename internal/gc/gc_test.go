package gc_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/gc"
	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/internal/mesh"
	"github.com/muster-tool/muster/internal/testutil/s3server"
	"github.com/muster-tool/muster/spool"
)

// fixture is a real mesh and its spool.
type fixture struct {
	t    *testing.T
	m    *mesh.Mesh
	sp   spool.Spool
	dir  *spool.Dir // nil for an S3 spool
	past time.Time  // two hours ago: old enough for every rule
}

func newFixture(t *testing.T, location string) *fixture {
	if location == "" {
		location = t.TempDir()
	}
	m, err := mesh.Init(t.Context(), filepath.Join(t.TempDir(), "mesh"), location, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, m: m, sp: m.Spool, past: time.Now().Add(-2 * time.Hour)}
	f.dir, _ = m.Spool.(*spool.Dir)
	return f
}

// commit writes generation gen's commit naming run, signed with key.
func (f *fixture) commit(gen uint64, run string, key ed25519.PrivateKey) {
	f.t.Helper()
	b, err := bundle.SignTOML(generation.Commit{Version: 1, Generation: gen, Run: run, DeclaredAt: time.Now().UTC().Truncate(time.Second)},
		generation.CommitCtx(gen), key)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.sp.Put(f.t.Context(), spool.CommitName(gen), b); err != nil {
		f.t.Fatal(err)
	}
}

// run writes the declaration bundles and manifest of one declare run,
// dated at (directory spools only).
func (f *fixture) run(gen uint64, run string, at time.Time, nodes ...string) []string {
	f.t.Helper()
	names := []string{spool.ManifestName(gen, run)}
	for _, n := range nodes {
		names = append(names, spool.DeclName(gen, run, n))
	}
	for _, n := range names {
		if err := f.sp.Put(f.t.Context(), n, []byte("bundle "+n)); err != nil {
			f.t.Fatal(err)
		}
		if f.dir != nil {
			p := filepath.Join(f.dir.Path(), filepath.FromSlash(n))
			if err := os.Chtimes(p, at, at); err != nil {
				f.t.Fatal(err)
			}
		}
	}
	return names
}

func (f *fixture) present(name string) bool {
	_, err := f.sp.Stat(context.Background(), name)
	return err == nil
}

func removed(rs []gc.Removal, rule string) []string {
	var out []string
	for _, r := range rs {
		if r.Rule == rule {
			out = append(out, r.Object)
		}
	}
	slices.Sort(out)
	return out
}

func TestTempFiles(t *testing.T) {
	f := newFixture(t, "")
	old := filepath.Join(f.dir.Path(), ".muster-tmp-0000000000000001")
	young := filepath.Join(f.dir.Path(), ".muster-tmp-0000000000000002")
	for _, p := range []string{old, young} {
		if err := os.WriteFile(p, []byte("part"), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	os.Chtimes(old, f.past, f.past)
	for _, dry := range []bool{true, false} {
		res, err := gc.Run(t.Context(), f.sp, gc.Options{DryRun: dry})
		if err != nil {
			t.Fatal(err)
		}
		if got := removed(res.Removed, gc.RuleTemp); !slices.Equal(got, []string{filepath.Base(old)}) {
			t.Errorf("dry run %v: temp files removed %v, want only the old one", dry, got)
		}
		_, errOld := os.Stat(old)
		if dry == (errOld != nil) {
			t.Errorf("dry run %v: old temp file exists = %v", dry, errOld == nil)
		}
		if _, err := os.Stat(young); err != nil {
			t.Errorf("dry run %v: the temp file of a write in progress was removed", dry)
		}
	}
	if !f.present("mesh/keys") {
		t.Error("gc removed an object")
	}
}

func TestLostRuns(t *testing.T) {
	f := newFixture(t, "")
	won1 := f.run(1, "runa", f.past, "n1", "n2")
	lost1 := f.run(1, "runb", f.past, "n1", "n2")
	f.commit(1, "runa", f.m.Pair.Sign)
	lostYoung := f.run(2, "runc", time.Now(), "n1")
	won2 := f.run(2, "rund", f.past, "n1")
	f.commit(2, "rund", f.m.Pair.Sign)
	uncommitted := f.run(3, "rune", f.past, "n1") // a declare in progress, or crashed: no commit yet
	// A commit not signed by the mesh decides nothing.
	_, other, _ := ed25519.GenerateKey(nil)
	forgedRun := f.run(4, "runf", f.past, "n1")
	f.commit(4, "rung", other)

	res, err := gc.Run(t.Context(), f.sp, gc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(lost1)
	slices.Sort(want)
	if got := removed(res.Removed, gc.RuleLostRun); !slices.Equal(got, want) {
		t.Errorf("lost-run removals = %v, want %v", got, want)
	}
	for _, n := range slices.Concat(won1, won2, lostYoung, uncommitted, forgedRun) {
		if !f.present(n) {
			t.Errorf("gc removed %s", n)
		}
	}
	for _, n := range lost1 {
		if f.present(n) {
			t.Errorf("gc left %s of the lost run", n)
		}
	}
	// The lost run's emptied directory goes with its bundles; one that
	// still holds a bundle too young to remove stays.
	for prefix, want := range map[string]bool{spool.DeclRunPrefix(1, "runb"): false, spool.DeclRunPrefix(2, "runc"): true, spool.DeclRunPrefix(1, "runa"): true} {
		_, err := os.Stat(filepath.Join(f.dir.Path(), filepath.FromSlash(prefix)))
		if got := err == nil; got != want {
			t.Errorf("directory %s exists = %v, want %v", prefix, got, want)
		}
	}
	if len(res.Notes) != 1 || !strings.Contains(res.Notes[0], "generation 4") {
		t.Errorf("notes = %q, want one saying generation 4 was kept", res.Notes)
	}
	for _, g := range []uint64{1, 2, 4} {
		if !f.present(spool.CommitName(g)) {
			t.Errorf("gc removed commit %d", g)
		}
	}
}

// assignedFrom answers gc's Assigned from a table of the nodes each
// generation assigned, counting the manifests read.
type assignedFrom struct {
	nodes map[uint64][]string
	read  map[uint64]int
}

func (a *assignedFrom) assigned(_ context.Context, gen uint64, run string) ([]string, bool, error) {
	if a.read == nil {
		a.read = map[uint64]int{}
	}
	a.read[gen]++
	ids, ok := a.nodes[gen]
	return ids, ok, nil
}

func TestSuperseded(t *testing.T) {
	f := newFixture(t, "")
	objs := map[uint64][]string{}
	a := &assignedFrom{nodes: map[uint64][]string{}}
	for g := uint64(1); g <= 5; g++ {
		nodes := []string{"n1", "n2"}
		if g == 2 {
			// n3 is assigned nothing newer, so it still needs generation 2.
			nodes = append(nodes, "n3")
		}
		objs[g] = f.run(g, "run", time.Now(), nodes...)
		f.commit(g, "run", f.m.Pair.Sign)
		a.nodes[g] = nodes
	}
	res, err := gc.Run(t.Context(), f.sp, gc.Options{Keep: 2, Assigned: a.assigned, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	// Only declaration bundles go; manifests stay for report's history.
	var want []string
	for _, o := range slices.Concat(objs[1], objs[3]) {
		if strings.HasPrefix(o, spool.DeclPrefix) {
			want = append(want, o)
		}
	}
	slices.Sort(want)
	if got := removed(res.Removed, gc.RuleSuperseded); !slices.Equal(got, want) {
		t.Errorf("superseded = %v, want the bundles of generations 1 and 3: %v", got, want)
	}
	// A generation whose manifest cannot be read is kept, and moves no
	// older one past.
	delete(a.nodes, 3)
	res, err = gc.Run(t.Context(), f.sp, gc.Options{Keep: 2, Assigned: a.assigned, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := removed(res.Removed, gc.RuleSuperseded); len(got) != 2 || !strings.Contains(got[0], spool.GenerationName(1)) {
		t.Errorf("generation 3 unreadable: superseded = %v, want generation 1's two bundles alone", got)
	}
	// The newest committed generation is never removed, whatever keep
	// says and however far nodes moved.
	a.nodes[3] = a.nodes[1]
	runs := map[uint64]string{1: "run", 2: "run", 3: "run", 4: "run", 5: "run"}
	everyone := func(context.Context, uint64, string) ([]string, bool, error) { return nil, true, nil }
	held, err := gc.HeldGenerations(t.Context(), f.sp)
	if err != nil {
		t.Fatal(err)
	}
	sel, _, _, err := gc.Superseded(t.Context(), f.sp, runs, held, 0, everyone, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range sel {
		if strings.Contains(r.Object, spool.GenerationName(5)) {
			t.Errorf("keep 0 selected %s of the newest generation", r.Object)
		}
	}
	if len(sel) != 4*2+1 {
		t.Errorf("keep 0 (taken as 1) selected %d objects, want the 9 bundles of generations 1-4", len(sel))
	}
	if _, err := gc.Run(t.Context(), f.sp, gc.Options{Keep: 2}); err == nil {
		t.Error("Keep without Assigned: no error")
	}
}

// TestSupersededReadsFewManifests: gc --keep reads the manifests of the
// generations that still hold bundles and of the ones after them only
// until each is decided, not every generation's on every run, and a
// directory spool loses the directories of the generations it emptied.
func TestSupersededReadsFewManifests(t *testing.T) {
	for _, backend := range []string{"dir", "s3"} {
		t.Run(backend, func(t *testing.T) {
			location := ""
			var px *s3server.Proxy
			if backend == "s3" {
				srv := s3server.Start(t)
				srv.SetEnv(t)
				px = srv.Proxy(t)
				location = px.URL("gc")
			}
			f := newFixture(t, location)
			a := &assignedFrom{nodes: map[uint64][]string{}}
			declare := func(g uint64) {
				f.run(g, "run", time.Now(), "n1", "n2")
				f.commit(g, "run", f.m.Pair.Sign)
				a.nodes[g] = []string{"n1", "n2"}
			}
			gc1 := func() []string {
				t.Helper()
				a.read = nil
				res, err := gc.Run(t.Context(), f.sp, gc.Options{Keep: 2, Assigned: a.assigned})
				if err != nil {
					t.Fatal(err)
				}
				return removed(res.Removed, gc.RuleSuperseded)
			}
			for g := uint64(1); g <= 30; g++ {
				declare(g)
			}
			// The first gc decides generations 1-28: each manifest from 1
			// to 29 read once.
			if got := gc1(); len(got) != 28*2 {
				t.Errorf("first gc removed %d bundles, want the 56 of generations 1-28", len(got))
			}
			for g := uint64(1); g <= 30; g++ {
				if n, want := a.read[g], map[bool]int{true: 1}[g <= 29]; n != want {
					t.Errorf("first gc read generation %d's manifest %d times, want %d", g, n, want)
				}
			}
			if f.dir != nil {
				for g := uint64(1); g <= 28; g++ {
					p := filepath.Join(f.dir.Path(), "decl", spool.GenerationName(g))
					if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
						t.Errorf("gc left %s: %v", p, err)
					}
				}
			}
			// Nothing has grown old since: no manifest is read, and the
			// generations whose bundles went are not listed one by one.
			if px != nil {
				px.Reset()
			}
			if got := gc1(); len(got) != 0 || len(a.read) != 0 {
				t.Errorf("second gc removed %v and read the manifests %v, want nothing", got, a.read)
			}
			if px != nil {
				// The commits, the manifests, decl/'s generations, and
				// the runs of the two that hold bundles.
				if n := px.Count()[s3server.KindList]; n != 5 {
					t.Errorf("second gc sent %d listings, want 5: %v", n, px.Requests())
				}
			}
			// A new generation: the one that grew old and the next decide.
			declare(31)
			if got := gc1(); len(got) != 2 || !strings.Contains(got[0], spool.GenerationName(29)) {
				t.Errorf("after generation 31 gc removed %v, want generation 29's bundles", got)
			}
			if len(a.read) != 2 || a.read[29] != 1 || a.read[30] != 1 {
				t.Errorf("after generation 31 gc read the manifests %v, want those of 29 and 30 once", a.read)
			}
			for g := uint64(1); g <= 31; g++ {
				if !f.present(spool.ManifestName(g, "run")) || !f.present(spool.CommitName(g)) {
					t.Errorf("gc removed the commit or manifest of generation %d", g)
				}
			}
		})
	}
}

// TestLostRunsS3 checks the age rule where the store dates objects: the
// listing's dates decide, with no request per object, and the lost run
// goes in one multi-object delete.
func TestLostRunsS3(t *testing.T) {
	srv := s3server.Start(t)
	srv.SetEnv(t)
	px := srv.Proxy(t)
	f := newFixture(t, px.URL("gc"))
	f.run(1, "runa", time.Time{}, "n1")
	lost := f.run(1, "runb", time.Time{}, "n1")
	f.commit(1, "runa", f.m.Pair.Sign)
	res, err := gc.Run(t.Context(), f.sp, gc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Removed) != 0 {
		t.Errorf("gc removed %v, written seconds ago", res.Removed)
	}
	px.Reset()
	res, err = gc.Run(t.Context(), f.sp, gc.Options{Now: time.Now().Add(2 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if n := px.Count(); n[s3server.KindHead]+n[s3server.KindDelete] != 0 || n[s3server.KindDeleteMany] != 1 {
		t.Errorf("gc sent %v: want no HEAD or DELETE, and one multi-object delete", n)
	}
	// The generation's runs are named by one listing with a delimiter;
	// the winner's bundles, one a node, are not listed.
	for _, r := range px.Requests() {
		if strings.Contains(r, "prefix=gc%2Fdecl%2F") && !strings.Contains(r, "delimiter=%2F") && !strings.Contains(r, "runb") {
			t.Errorf("gc listed %s", r)
		}
	}
	want := slices.Clone(lost)
	slices.Sort(want)
	if got := removed(res.Removed, gc.RuleLostRun); !slices.Equal(got, want) {
		t.Errorf("two hours later gc removed %v, want %v", got, want)
	}
	for _, n := range lost {
		if f.present(n) {
			t.Errorf("%s is still in the store", n)
		}
	}
}

// TestRevokedObjects: the reports and briefings of revoked identities go,
// except the report each names to keep (its node's recovery copy); the
// reports and briefings of trusted identities stay, and without Revoked
// none goes.
func TestRevokedObjects(t *testing.T) {
	f := newFixture(t, "")
	put := func(name string) string {
		t.Helper()
		if err := f.sp.Put(t.Context(), name, []byte("report "+name)); err != nil {
			t.Fatal(err)
		}
		return name
	}
	const old, gone, trusted = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210", "00112233445566778899aabbccddeeff"
	oldReports := []string{put(spool.ReportName(old, 1, 1)), put(spool.ReportName(old, 1, 2))}
	goneFirst, goneKeep := put(spool.ReportName(gone, 1, 1)), put(spool.ReportName(gone, 2, 1))
	trustedReport := put(spool.ReportName(trusted, 2, 1))
	oldBrief := put(spool.BriefName(old, 7))
	trustedBrief := put(spool.BriefName(trusted, 8))

	if res, err := gc.Run(t.Context(), f.sp, gc.Options{}); err != nil || len(removed(res.Removed, gc.RuleRevoked)) != 0 {
		t.Fatalf("without Revoked: %v, %v", res.Removed, err)
	}
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	// The objects as the mesh found them; a name not the identity's is
	// never removed by its revocation.
	revoked := map[string]gc.Revoked{
		old: {Name: "web-1", RevokedAt: at, Reason: "replaced by re-enrolment",
			Objects: append(slices.Clone(oldReports), oldBrief, trustedBrief)},
		gone: {Name: "web-2", RevokedAt: at, Reason: "host retired", Keep: goneKeep,
			Objects: []string{goneFirst, goneKeep, trustedReport}},
	}
	res, err := gc.Run(t.Context(), f.sp, gc.Options{Revoked: revoked, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	want := append(slices.Clone(oldReports), goneFirst, oldBrief)
	slices.Sort(want)
	if got := removed(res.Removed, gc.RuleRevoked); !slices.Equal(got, want) {
		t.Errorf("dry run selected %v, want %v", got, want)
	}
	for _, n := range want {
		if !f.present(n) {
			t.Errorf("dry run removed %s", n)
		}
	}
	for _, r := range res.Removed {
		if r.Object == goneFirst && !strings.Contains(r.Detail, "identity "+gone+" of web-2 was revoked at 2026-03-01T12:00:00Z: host retired") {
			t.Errorf("detail %q does not say whose and why", r.Detail)
		}
		if r.Object == oldBrief && !strings.Contains(r.Detail, "its briefings are refused") {
			t.Errorf("detail %q does not say what is refused", r.Detail)
		}
	}

	if _, err := gc.Run(t.Context(), f.sp, gc.Options{Revoked: revoked}); err != nil {
		t.Fatal(err)
	}
	for _, n := range want {
		if f.present(n) {
			t.Errorf("%s is still there", n)
		}
	}
	for _, n := range []string{goneKeep, trustedReport, trustedBrief} {
		if !f.present(n) {
			t.Errorf("%s was removed", n)
		}
	}
}

// TestDecidedJoins: the join requests decided says are decided go, the
// pending ones stay, and without DecidedJoins none goes. On a directory
// spool the directory of a token whose requests all went goes too, and a
// join request put there again afterwards (a host joining once more with
// a spent token) finds its directory made again.
func TestDecidedJoins(t *testing.T) {
	for _, backend := range []string{"dir", "s3"} {
		t.Run(backend, func(t *testing.T) {
			location := ""
			if backend == "s3" {
				srv := s3server.Start(t)
				srv.SetEnv(t)
				location = srv.URL("gc")
			}
			f := newFixture(t, location)
			const tokA, tokB = "0123456789abcdef0123456789abcdef", "11111111111111111111111111111111"
			const host1, host2, host3 = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "cccccccccccccccccccccccccccccccc"
			admitted, refused := spool.JoinName(tokA, host1), spool.JoinName(tokA, host2)
			pending, alone := spool.JoinName(tokA, host3), spool.JoinName(tokB, host3)
			for _, n := range []string{admitted, refused, alone, pending} {
				if err := f.sp.Put(t.Context(), n, []byte("join "+n)); err != nil {
					t.Fatal(err)
				}
			}
			decided := func(tid, fp string) (string, bool) {
				switch tid + "/" + fp {
				case tokA + "/" + host1, tokB + "/" + host3:
					return "admitted as web-1", true
				case tokA + "/" + host2:
					return "refused: the token was used", true
				}
				return "", false
			}
			if res, err := gc.Run(t.Context(), f.sp, gc.Options{}); err != nil || len(removed(res.Removed, gc.RuleDecided)) != 0 {
				t.Fatalf("without DecidedJoins: %v, %v", res.Removed, err)
			}
			want := []string{admitted, refused, alone}
			slices.Sort(want)
			res, err := gc.Run(t.Context(), f.sp, gc.Options{DecidedJoins: decided, DryRun: true})
			if err != nil {
				t.Fatal(err)
			}
			if got := removed(res.Removed, gc.RuleDecided); !slices.Equal(got, want) {
				t.Errorf("dry run selected %v, want %v", got, want)
			}
			for _, r := range res.Removed {
				if r.Object == refused && r.Detail != "refused: the token was used" {
					t.Errorf("detail %q is not the decision's", r.Detail)
				}
			}
			for _, n := range want {
				if !f.present(n) {
					t.Errorf("dry run removed %s", n)
				}
			}
			if _, err := gc.Run(t.Context(), f.sp, gc.Options{DecidedJoins: decided}); err != nil {
				t.Fatal(err)
			}
			for _, n := range want {
				if f.present(n) {
					t.Errorf("%s is still there", n)
				}
			}
			if !f.present(pending) {
				t.Errorf("the pending request %s went", pending)
			}
			if f.dir == nil {
				return
			}
			dirOf := func(tid string) string { return filepath.Join(f.dir.Path(), "enrol", "join", tid) }
			if _, err := os.Stat(dirOf(tokB)); !os.IsNotExist(err) {
				t.Errorf("the emptied directory of token %s: %v, want it gone", tokB, err)
			}
			if _, err := os.Stat(dirOf(tokA)); err != nil {
				t.Errorf("the directory of token %s, which holds a pending request: %v, want it kept", tokA, err)
			}
			if err := f.sp.Put(t.Context(), alone, []byte("join again")); err != nil {
				t.Errorf("a join request put again after gc: %v", err)
			}
		})
	}
}

// failingDelete is a spool whose Delete of one object fails.
type failingDelete struct {
	spool.Spool
	fail string
}

func (s failingDelete) Delete(ctx context.Context, name string) error {
	if name == s.fail {
		return errors.New("the store said no")
	}
	return s.Spool.Delete(ctx, name)
}

// A removal that fails stops gc with its error, and what gc says it
// removed is exactly what is gone: the objects are removed many at once.
func TestRemovalFails(t *testing.T) {
	f := newFixture(t, "")
	var names []string
	for i := range 100 {
		name := spool.JoinName("0123456789abcdef0123456789abcdef", fmt.Sprintf("%032x", i))
		if err := f.sp.Put(t.Context(), name, []byte("join")); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	decided := func(string, string) (string, bool) { return "admitted", true }
	sp := failingDelete{Spool: f.sp, fail: names[50]}
	res, err := gc.Run(t.Context(), sp, gc.Options{DecidedJoins: decided})
	if err == nil || !strings.Contains(err.Error(), "the store said no") {
		t.Fatalf("gc with a failing removal: %v", err)
	}
	said := map[string]bool{}
	for _, r := range res.Removed {
		said[r.Object] = true
	}
	if said[names[50]] {
		t.Errorf("gc says it removed %s, whose removal failed", names[50])
	}
	for _, n := range names {
		if said[n] == f.present(n) {
			t.Errorf("%s: said removed %v, still there %v", n, said[n], f.present(n))
		}
	}
}

// gc reads each generation's commit and lists its runs on every run:
// after years of daily declares, thousands of round trips to an object
// store. Several generations are read at once.
func TestGenerationsReadAtOnce(t *testing.T) {
	srv := s3server.Start(t)
	srv.SetEnv(t)
	px := srv.Proxy(t)
	f := newFixture(t, px.URL("gc"))
	const gens = 40
	for g := uint64(1); g <= gens; g++ {
		f.commit(g, "run", f.m.Pair.Sign)
	}
	_, other, _ := ed25519.GenerateKey(nil)
	f.commit(gens+1, "forged", other)
	px.SetDelay(10 * time.Millisecond)
	px.Reset()
	res, err := gc.Run(t.Context(), f.sp, gc.Options{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	// The mesh's keys, and each commit once.
	if n := px.Count()[s3server.KindGet]; n != gens+2 {
		t.Errorf("%d GETs, want %d", n, gens+2)
	}
	if n := px.MaxInFlight(); n < 2 {
		t.Errorf("at most %d request in flight: the generations were read one after another", n)
	}
	if len(res.Notes) != 1 || !strings.Contains(res.Notes[0], fmt.Sprintf("generation %d", gens+1)) {
		t.Errorf("notes = %q, want one keeping generation %d, whose commit is forged", res.Notes, gens+1)
	}
}

// BenchmarkGenerations runs gc (a dry run) on an S3 spool of
// MUSTER_BENCH_GC_GENERATIONS committed generations (default 200) through
// a proxy that holds each request 30 ms, as a store across a network
// answers, reading one generation at a time (at_once=1, as before) and
// several (at_once=16), in turn, twice.
//
//	go test -run '^$' -bench Generations ./internal/gc
func BenchmarkGenerations(b *testing.B) {
	gens := 200
	if n, err := strconv.Atoi(os.Getenv("MUSTER_BENCH_GC_GENERATIONS")); err == nil && n > 0 {
		gens = n
	}
	srv := s3server.Start(b)
	srv.SetEnv(b)
	px := srv.Proxy(b)
	m, err := mesh.Init(b.Context(), filepath.Join(b.TempDir(), "mesh"), px.URL("gc"), time.Now())
	if err != nil {
		b.Fatal(err)
	}
	for g := uint64(1); g <= uint64(gens); g++ {
		c, err := bundle.SignTOML(generation.Commit{Version: 1, Generation: g, Run: "run", DeclaredAt: time.Now().UTC().Truncate(time.Second)},
			generation.CommitCtx(g), m.Pair.Sign)
		if err != nil {
			b.Fatal(err)
		}
		if err := m.Spool.Put(b.Context(), spool.CommitName(g), c); err != nil {
			b.Fatal(err)
		}
	}
	px.SetDelay(30 * time.Millisecond)
	for range 2 {
		for _, n := range []int{1, 16} {
			b.Run(fmt.Sprintf("generations=%d/at_once=%d", gens, n), func(b *testing.B) {
				defer gc.SetPerGeneration(n)()
				for b.Loop() {
					if _, err := gc.Run(b.Context(), m.Spool, gc.Options{DryRun: true}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestSupersededRemembersWhatIsStillNeeded: a generation a node still
// needs (n9, in generation 3 and no newer one) costs each later gc only
// the manifests declared since, through the file Memo names; a file that
// no longer matches the spool's commits, or cannot be read, is worked out
// again from the manifests.
func TestSupersededRemembersWhatIsStillNeeded(t *testing.T) {
	f := newFixture(t, "")
	memo := filepath.Join(t.TempDir(), "cache", "gc-keep.cache")
	a := &assignedFrom{nodes: map[uint64][]string{}}
	declare := func(g uint64, nodes ...string) {
		f.run(g, "run", time.Now(), nodes...)
		f.commit(g, "run", f.m.Pair.Sign)
		a.nodes[g] = nodes
	}
	gc1 := func(what string, wantGens []uint64, wantRead []uint64) gc.Result {
		t.Helper()
		a.read = nil
		res, err := gc.Run(t.Context(), f.sp, gc.Options{Keep: 2, Assigned: a.assigned, Memo: memo})
		if err != nil {
			t.Fatal(err)
		}
		var gens []uint64
		for _, o := range removed(res.Removed, gc.RuleSuperseded) {
			g, _, _, err := spool.ParseDeclName(o)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(gens, g) {
				gens = append(gens, g)
			}
		}
		if !slices.Equal(gens, wantGens) {
			t.Errorf("%s: gc removed the bundles of generations %v, want %v", what, gens, wantGens)
		}
		read := slices.Sorted(maps.Keys(a.read))
		if !slices.Equal(read, wantRead) {
			t.Errorf("%s: gc read the manifests of %v, want %v", what, read, wantRead)
		}
		for g, n := range a.read {
			if n != 1 {
				t.Errorf("%s: gc read generation %d's manifest %d times", what, g, n)
			}
		}
		return res
	}
	for g := uint64(1); g <= 10; g++ {
		if g == 3 {
			declare(g, "n1", "n2", "n9")
		} else {
			declare(g, "n1", "n2")
		}
	}
	gc1("first gc", []uint64{1, 2, 4, 5, 6, 7, 8}, []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
	gc1("nothing new", nil, nil)
	declare(11, "n1", "n2")
	gc1("generation 11", []uint64{9}, []uint64{9, 10, 11})

	// The spool's commits no longer match what the file was learned
	// from (generation 5's commit names another run, as in a copy of
	// another history): every manifest from generation 3 up is read.
	data, err := os.ReadFile(memo)
	if err != nil {
		t.Fatal(err)
	}
	runs := map[uint64]string{}
	for g := uint64(1); g <= 11; g++ {
		runs[g] = "run"
	}
	runs[5] = "other"
	pending := map[uint64]gc.Pending{3: {Through: 11, Runs: gc.RunsDigest(runs, 3, 11), Waiting: []string{"n9"}}}
	if err := gc.WriteMemo(memo, f.sp.String(), pending); err != nil {
		t.Fatal(err)
	}
	gc1("another history", nil, []uint64{3, 4, 5, 6, 7, 8, 9, 10, 11})
	// A damaged file: the same, with a note.
	if err := os.WriteFile(memo, data[:len(data)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	res := gc1("damaged file", nil, []uint64{3, 4, 5, 6, 7, 8, 9, 10, 11})
	if len(res.Notes) != 1 || !strings.Contains(res.Notes[0], memo) {
		t.Errorf("damaged file: notes %q, want one naming %s", res.Notes, memo)
	}

	// n9 is assigned again: generation 3 goes, for the one manifest
	// declared since, beside generation 10's two.
	declare(12, "n1", "n2", "n9")
	gc1("n9 assigned again", []uint64{3, 10}, []uint64{10, 11, 12})
}

// TestSupersededRetiredKeepNothing: a generation kept for a node no newer
// one assigns goes once that node's identity is retired (revoked), whether
// gc remembered it waiting or reads it afresh.
func TestSupersededRetiredKeepNothing(t *testing.T) {
	for _, remembered := range []bool{true, false} {
		t.Run(fmt.Sprintf("remembered=%v", remembered), func(t *testing.T) {
			f := newFixture(t, "")
			memo := filepath.Join(t.TempDir(), "gc-keep.cache")
			a := &assignedFrom{nodes: map[uint64][]string{}}
			for g := uint64(1); g <= 4; g++ {
				nodes := []string{"n1", "n2"}
				if g == 1 {
					nodes = append(nodes, "n9")
				}
				f.run(g, "run", time.Now(), nodes...)
				f.commit(g, "run", f.m.Pair.Sign)
				a.nodes[g] = nodes
			}
			opts := gc.Options{Keep: 1, Assigned: a.assigned, Memo: memo}
			if !remembered {
				opts.Memo = ""
			}
			res, err := gc.Run(t.Context(), f.sp, opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := removed(res.Removed, gc.RuleSuperseded); len(got) != 4 || strings.Contains(strings.Join(got, " "), spool.GenerationName(1)) {
				t.Errorf("before n9 is retired gc removed %v, want generations 2 and 3 alone", got)
			}
			opts.Retired = func(id string) bool { return id == "n9" }
			a.read = nil
			res, err = gc.Run(t.Context(), f.sp, opts)
			if err != nil {
				t.Fatal(err)
			}
			want := []string{spool.DeclName(1, "run", "n1"), spool.DeclName(1, "run", "n2"), spool.DeclName(1, "run", "n9")}
			if got := removed(res.Removed, gc.RuleSuperseded); !slices.Equal(got, want) {
				t.Errorf("n9 retired: gc removed %v, want %v", got, want)
			}
			if read := slices.Sorted(maps.Keys(a.read)); !slices.Equal(read, []uint64{1, 2}) {
				t.Errorf("n9 retired: gc read the manifests of %v, want 1 and 2", read)
			}
		})
	}
}
