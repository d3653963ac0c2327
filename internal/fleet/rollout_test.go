package fleet

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/generation"
)

// The page's counts per generation are the history's: the same rules,
// for the same nodes.
func TestRolloutsCountAsHistory(t *testing.T) {
	f := goldenFixture(t)
	s := f.load(false)
	ctx := context.Background()
	for _, sel := range []Selection{{}, {All: true}, {Names: []string{"web-2", "db-1"}}} {
		h, err := s.History(ctx, sel)
		if err != nil {
			t.Fatal(err)
		}
		rs, err := s.Rollouts(ctx, 0, 20, sel)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != len(h) {
			t.Fatalf("%+v: %d rollouts, %d generations in the history", sel, len(rs), len(h))
		}
		for i := range h {
			if !reflect.DeepEqual(rs[i].HistoryEntry, h[i]) {
				t.Errorf("%+v: rollout %+v, history %+v", sel, rs[i].HistoryEntry, h[i])
			}
			if len(rs[i].AppliedAfter) != h[i].Totals.Applied {
				t.Errorf("%+v: generation %d: %d apply times for %d applied", sel, h[i].Generation, len(rs[i].AppliedAfter), h[i].Totals.Applied)
			}
		}
	}
}

// A node counts as applied from its first passing report of the
// generation, and only if it is applied now; a failed report, or one of
// another history's commit, before it does not count.
func TestRolloutsApplyTimes(t *testing.T) {
	f := newFixture(t)
	retry, steady, broke, forked := f.enrol("retry", t0), f.enrol("steady", t0), f.enrol("broke", t0), f.enrol("forked", t0)
	man := func() *generation.Manifest {
		return &generation.Manifest{Nodes: []generation.ManifestNode{assign(retry), assign(steady), assign(broke), assign(forked)}}
	}
	at := t0.Add(time.Hour)
	c1 := f.commitAfter(1, at, man(), nil, "")
	f.write(retry, 1, 1, f.report(retry, 1, at.Add(10*time.Minute), "package:nginx"))
	f.reportOK(retry, 1, 2, at.Add(30*time.Minute))
	f.reportOK(retry, 1, 3, at.Add(50*time.Minute))
	f.reportOK(steady, 1, 1, at.Add(20*time.Minute))
	f.reportOK(broke, 1, 1, at.Add(5*time.Minute))
	f.write(broke, 1, 2, f.report(broke, 1, at.Add(40*time.Minute), "service:nginx"))
	other := f.report(forked, 1, at.Add(2*time.Minute))
	other.Commit = "sha256:" + strings.Repeat("ab", 32)
	f.write(forked, 1, 1, other)
	r := f.report(forked, 1, at.Add(45*time.Minute))
	r.Commit = c1.Digest
	f.write(forked, 1, 2, r)
	c2 := f.commitAfter(2, at.Add(24*time.Hour), man(), c1, "")
	f.commitAfter(3, at.Add(48*time.Hour), man(), c2, "")
	f.reportOK(steady, 3, 1, at.Add(48*time.Hour+3*time.Minute))

	s := f.load(false)
	rs, err := s.Rollouts(context.Background(), 0, 20, Selection{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 3 || rs[0].Generation != 3 || rs[2].Generation != 1 {
		t.Fatalf("rollouts %+v, want generations 3, 2, 1", rs)
	}
	g1 := rs[2]
	want := []time.Duration{20 * time.Minute, 30 * time.Minute, 45 * time.Minute}
	if !reflect.DeepEqual(g1.AppliedAfter, want) || g1.Totals.Failed != 1 || g1.Totals.Assigned() != 4 {
		t.Errorf("generation 1: applied after %v, totals %+v; want %v, 1 failed of 4 assigned", g1.AppliedAfter, g1.Totals, want)
	}
	if got := rs[0].AppliedAfter; !reflect.DeepEqual(got, []time.Duration{3 * time.Minute}) {
		t.Errorf("generation 3: applied after %v, want [3m]", got)
	}
	if rs[1].Totals.Outstanding != 4 || len(rs[1].AppliedAfter) != 0 {
		t.Errorf("generation 2: %+v, want 4 outstanding and no apply times", rs[1])
	}

	// The last N up to a generation.
	rs, err = s.Rollouts(context.Background(), 2, 1, Selection{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].Generation != 2 {
		t.Errorf("the last 1 up to generation 2: %+v", rs)
	}
}
