package declare

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/spool"
)

// markedSite is a declaration whose motd says which declare wrote it.
func markedSite(mark string) string {
	return strings.Replace(webSite, "managed by muster", "managed by muster: "+mark, 1)
}

// checkGenerations checks every committed generation: one commit each,
// numbered 1..n without a gap, and every node's bundle under the run the
// commit names decodes and carries one declare's mark, the same for all
// nodes. It returns the mark of each generation.
func checkGenerations(t *testing.T, f *fixture, nodes []string) map[uint64]string {
	t.Helper()
	gens := committed(f)
	marks := map[uint64]string{}
	for i, g := range gens {
		if want := uint64(len(gens) - i); g != want {
			t.Fatalf("committed generations %v: want 1..%d without a gap", gens, len(gens))
		}
		c := f.commit(g)
		for _, n := range nodes {
			nd := f.mustOpen(n, g)
			if nd.Run != c.Run || nd.Generation != g {
				t.Errorf("generation %d: %s's bundle is of run %s generation %d, the commit names run %s", g, n, nd.Run, nd.Generation, c.Run)
			}
			mark := nd.Resources[1].Content
			if prev, ok := marks[g]; ok && prev != mark {
				t.Errorf("generation %d mixes declarations: %q and %q", g, prev, mark)
			}
			marks[g] = mark
		}
	}
	return marks
}

// Two declares racing, many times: every generation is committed once,
// each by exactly one of them, and no generation mixes their bundles.
func TestRacingDeclaresNeverShareOrMixAGeneration(t *testing.T) {
	f := newFixture(t)
	nodes := []string{"web-1", "web-2", "web-3"}
	for _, n := range nodes {
		f.enrol(n, nil)
	}
	lost := &conflictCounter{Spool: f.m.Spool}
	f.m.Spool = lost
	const rounds = 10
	type outcome struct {
		mark string
		res  *Result
		err  error
	}
	var all []outcome
	for r := range rounds {
		var wg sync.WaitGroup
		out := make([]outcome, 2)
		for side := range 2 {
			mark := fmt.Sprintf("round %d side %d", r, side)
			d := f.parse(markedSite(mark), nil)
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := f.declare(d, Options{Retries: 10})
				out[side] = outcome{mark, res, err}
			}()
		}
		wg.Wait()
		all = append(all, out...)
	}
	marks := checkGenerations(t, f, nodes)
	byGen := map[uint64]string{}
	for _, o := range all {
		if o.err != nil {
			if fault.ClassOf(o.err) != fault.Temporary || !strings.Contains(o.err.Error(), "first") {
				t.Errorf("%s: err = %v, want a lost race or success", o.mark, o.err)
			}
			continue
		}
		if o.res.Unchanged {
			t.Errorf("%s: unchanged, but no other declare had its content", o.mark)
			continue
		}
		if prev, dup := byGen[o.res.Generation]; dup {
			t.Errorf("generation %d committed by both %q and %q", o.res.Generation, prev, o.mark)
		}
		byGen[o.res.Generation] = o.mark
		if got := marks[o.res.Generation]; got != "managed by muster: "+o.mark+"\n" {
			t.Errorf("%s reported generation %d, whose bundles say %q", o.mark, o.res.Generation, got)
		}
	}
	if len(byGen) != len(marks) {
		t.Errorf("%d generations committed, %d reported by declares", len(marks), len(byGen))
	}
	t.Logf("%d of %d rounds had a commit lost to the other declare", lost.n.Load(), rounds)
}

// conflictCounter counts the commits lost to another declare.
type conflictCounter struct {
	spool.Spool
	n atomic.Int32
}

func (s *conflictCounter) Put(ctx context.Context, name string, data []byte) error {
	err := s.Spool.Put(ctx, name, data)
	if errors.Is(err, spool.ErrConflict) && strings.HasPrefix(name, spool.CommitPrefix) {
		s.n.Add(1)
	}
	return err
}

// raceSpool runs a hook before the commit it is asked to write, as if
// another declare got there first.
type raceSpool struct {
	spool.Spool
	before func(gen uint64)
}

func (s *raceSpool) Put(ctx context.Context, name string, data []byte) error {
	if g, err := spool.ParseCommitName(name); err == nil && s.before != nil {
		s.before(g)
	}
	return s.Spool.Put(ctx, name, data)
}

// other is a second fixture sharing f's mesh, spool and fleet, so that it
// can declare while f is in the middle of declaring.
func (f *fixture) other() *fixture {
	o := *f
	m := *f.m
	o.m = &m
	return &o
}

func TestLostRaceRetriesAsTheNextGeneration(t *testing.T) {
	f := newFixture(t)
	nodes := []string{"web-1", "web-2"}
	for _, n := range nodes {
		f.enrol(n, nil)
	}
	f.mustDeclare(f.parse(markedSite("first"), nil), Options{})
	rival := f.other()
	fired := false
	f.m.Spool = &raceSpool{Spool: rival.m.Spool, before: func(gen uint64) {
		if !fired {
			fired = true
			rival.mustDeclare(rival.parse(markedSite("rival"), nil), Options{})
		}
	}}
	res := f.mustDeclare(f.parse(markedSite("ours"), nil), Options{})
	if res.Generation != 3 || res.Previous != 2 || res.Unchanged {
		t.Fatalf("result = %+v, want generation 3 after the rival's 2", res)
	}
	// The retry compared against what the rival committed, not against
	// generation 1.
	if got := res.Nodes[0].Changed; len(got) != 1 || got[0] != "file:/etc/motd" {
		t.Errorf("changes = %+v", res.Nodes[0])
	}
	marks := checkGenerations(t, f, nodes)
	want := map[uint64]string{1: "first", 2: "rival", 3: "ours"}
	for g, m := range want {
		if marks[g] != "managed by muster: "+m+"\n" {
			t.Errorf("generation %d says %q, want %s's", g, marks[g], m)
		}
	}
	// What the lost attempt wrote for generation 2 is there, under a run
	// no commit names.
	if runs := withPrefix(f.objects(), spool.ManifestPrefix+spool.GenerationName(2)+"/"); len(runs) != 2 {
		t.Errorf("manifests of generation 2: %v, want the rival's and the lost attempt's", runs)
	}
}

func TestLostRaceToTheSameDeclarationIsUnchanged(t *testing.T) {
	f := newFixture(t)
	f.enrol("web-1", nil)
	rival := f.other()
	fired := false
	f.m.Spool = &raceSpool{Spool: rival.m.Spool, before: func(uint64) {
		if !fired {
			fired = true
			rival.mustDeclare(rival.parse(webSite, nil), Options{})
		}
	}}
	res := f.mustDeclare(f.parse(webSite, nil), Options{})
	if !res.Unchanged || res.Generation != 1 {
		t.Errorf("result = %+v, want unchanged: the rival committed the same as generation 1", res)
	}
	if gens := committed(f); len(gens) != 1 {
		t.Errorf("committed %v, want [1]", gens)
	}
}

func TestLostRaceGivesUpWithAClearError(t *testing.T) {
	f := newFixture(t)
	nodes := []string{"web-1"}
	f.enrol("web-1", nil)
	rival := f.other()
	n := 0
	f.m.Spool = &raceSpool{Spool: rival.m.Spool, before: func(uint64) {
		n++
		rival.mustDeclare(rival.parse(markedSite(fmt.Sprint("rival ", n)), nil), Options{})
	}}
	_, err := f.declare(f.parse(markedSite("ours"), nil), Options{})
	if err == nil {
		t.Fatal("declare succeeded against a rival that always commits first")
	}
	if fault.ClassOf(err) != fault.Temporary || err.Error() != "another declare committed generation 3 first, 3 times in a row; nothing of this declare was committed" {
		t.Errorf("err = %q (class %v)", err, fault.ClassOf(err))
	}
	if fault.HintOf(err) == "" {
		t.Error("no hint")
	}
	var lost *lostRace
	if errors.As(err, &lost) {
		t.Error("the internal lost-race error leaks out")
	}
	marks := checkGenerations(t, f, nodes)
	for g := uint64(1); g <= 3; g++ {
		if !strings.Contains(marks[g], "rival") {
			t.Errorf("generation %d says %q, want a rival's", g, marks[g])
		}
	}
}
