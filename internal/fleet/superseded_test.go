package fleet

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/enrol"
	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/spool"
)

// The reports SupersededReports selects are exactly the older runs no
// answer depends on: removed from the spool, every view, the history, the
// rollouts (apply times included) and the recovery copies are as they
// were, loaded with the cache and without it. Kept: the counted report,
// the first that passed, one that ended later than the counted one, one
// of another history, one that does not verify, and every report of a
// revoked identity.
func TestSupersededReportsChangeNoAnswer(t *testing.T) {
	f := newFixture(t)
	retry, clock, old := f.enrol("retry", t0), f.enrol("clock", t0), f.enrol("old", t0)
	man := func() *generation.Manifest {
		return &generation.Manifest{Nodes: []generation.ManifestNode{assign(retry), assign(clock), assign(old)}}
	}
	at := t0.Add(time.Hour)
	c1 := f.commitAfter(1, at, man(), nil, "")
	// retry: failed, passed (the first), passed, passed (counted).
	failedFirst := f.write(retry, 1, 1, f.report(retry, 1, at.Add(10*time.Minute), "package:nginx"))
	f.reportOK(retry, 1, 2, at.Add(20*time.Minute))
	middle := f.reportOK(retry, 1, 3, at.Add(30*time.Minute))
	countedRetry := f.reportOK(retry, 1, 4, at.Add(40*time.Minute))
	// clock: passed (the first), one that ended after the counted one (its
	// host's clock went back), another history's, the counted one, and a
	// newer one signed by another key.
	f.reportOK(clock, 1, 1, at.Add(10*time.Minute))
	f.reportOK(clock, 1, 2, at.Add(5*time.Hour))
	other := f.report(clock, 1, at.Add(20*time.Minute))
	other.Commit = "sha256:" + strings.Repeat("ab", 32)
	f.write(clock, 1, 3, other)
	r := f.report(clock, 1, at.Add(4*time.Hour))
	r.Commit = c1.Digest
	f.write(clock, 1, 4, r)
	junk, err := sealAs(f, old, clock.NodeID, 1, 5, f.report(clock, 1, at.Add(6*time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	f.put(spool.ReportName(clock.NodeID, 1, 5), junk)
	// old: revoked, with runs that would otherwise be superseded.
	for seq := range uint64(3) {
		f.reportOK(old, 1, seq+1, at.Add(time.Duration(seq)*time.Minute))
	}
	f.revoke(old, at.Add(time.Hour), "host retired")
	c2 := f.commitAfter(2, at.Add(24*time.Hour), man(), c1, "")
	// retry on generation 2: a failed run after a passing one.
	f.reportOK(retry, 2, 1, at.Add(25*time.Hour))
	f.write(retry, 2, 2, f.report(retry, 2, at.Add(26*time.Hour), "service:nginx"))
	f.commitAfter(3, at.Add(48*time.Hour), man(), c2, "")

	answers := func(s *State) string {
		t.Helper()
		var b strings.Builder
		for _, gen := range []uint64{1, 2, 3} {
			b.WriteString(jsonOf(t, f.view(s, gen, Selection{All: true})))
		}
		h, err := s.History(f.ctx, Selection{All: true})
		if err != nil {
			t.Fatal(err)
		}
		rs, err := s.Rollouts(f.ctx, 0, 10, Selection{All: true})
		if err != nil {
			t.Fatal(err)
		}
		rc, err := s.RecoveryCopies()
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []any{h, rs, rc} {
			data, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(data)
		}
		return b.String()
	}
	s := f.load(true)
	before := answers(s)
	got := s.SupersededReports()
	want := []enrol.Superseded{{Object: failedFirst, By: countedRetry}, {Object: middle, By: countedRetry}}
	slices.SortFunc(want, func(a, b enrol.Superseded) int { return strings.Compare(a.Object, b.Object) })
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("superseded %+v\nwant %+v", got, want)
	}
	// As spool gc asks: from the reports alone.
	reportsOnly, err := Load(f.ctx, f.m, f.reg, Options{CacheDir: f.cacheDir(), NoBriefings: true})
	if err != nil {
		t.Fatal(err)
	}
	if again := reportsOnly.SupersededReports(); !reflect.DeepEqual(again, want) {
		t.Errorf("from the reports alone: superseded %+v\nwant %+v", again, want)
	}
	for _, r := range got {
		if err := f.m.Spool.Delete(f.ctx, r.Object); err != nil {
			t.Fatal(err)
		}
	}
	for _, cached := range []bool{true, false} {
		s := f.load(cached)
		if after := answers(s); after != before {
			t.Errorf("with the cache %v, the answers changed once the superseded reports went:\nbefore %s\nafter  %s", cached, before, after)
		}
		if again := s.SupersededReports(); len(again) != 0 {
			t.Errorf("with the cache %v, superseded again: %+v", cached, again)
		}
	}
}
