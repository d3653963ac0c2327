package fleet

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/fault"
)

// TestRefreshReadsOnlyWhatIsNew: each poll of a wait reads the reports
// that arrived since the last one and nothing else, even without a cache
// on disk, and sees them.
func TestRefreshReadsOnlyWhatIsNew(t *testing.T) {
	for _, cached := range []bool{false, true} {
		t.Run(fmt.Sprintf("cache on disk %t", cached), func(t *testing.T) {
			f, ids := cacheFixture(t)
			s := f.load(cached)
			if n := find(f.view(s, 0, Selection{}), "laptop"); n.Status != Outstanding {
				t.Fatalf("laptop is %s before it reported", n.Status)
			}
			f.sp.take()

			if err := s.Refresh(f.ctx); err != nil {
				t.Fatal(err)
			}
			if got := f.sp.takeData(); len(got) != 0 || s.Stats.ReportsRead != 0 {
				t.Errorf("a refresh with nothing new read %q (%d reports)", got, s.Stats.ReportsRead)
			}

			newReport := f.reportOK(ids["laptop"], 1, 1, t0.Add(5*time.Hour))
			if err := s.Refresh(f.ctx); err != nil {
				t.Fatal(err)
			}
			if got := f.sp.takeData(); strings.Join(got, " ") != newReport || s.Stats.ReportsRead != 1 {
				t.Errorf("a refresh after one new report read %q (%d reports), want only %s", got, s.Stats.ReportsRead, newReport)
			}
			v := f.view(s, 0, Selection{})
			if n := find(v, "laptop"); n.Status != Applied {
				t.Errorf("after the refresh laptop is %s, want applied", n.Status)
			}
			if len(v.Flagged) != 1 || len(s.Warnings) != 0 {
				t.Errorf("a refresh keeps what was flagged, and warns only of what is new: flagged %v, warnings %q", v.Flagged, s.Warnings)
			}
		})
	}
}

func TestParseTarget(t *testing.T) {
	for _, c := range []struct{ in, out string }{
		{"all-applied", "all-applied"},
		{"applied=3", "applied=3"},
		{"applied=50%", "applied=50%"},
		{"applied=100%", "applied=100%"},
	} {
		tg, err := ParseTarget(c.in)
		if err != nil || tg.String() != c.out {
			t.Errorf("ParseTarget(%q) = %v, %v", c.in, tg, err)
		}
	}
	for _, in := range []string{"", "all", "applied", "applied=", "applied=0", "applied=-1", "applied=0%", "applied=101%", "applied=x", "failed=1"} {
		if _, err := ParseTarget(in); err == nil || fault.ClassOf(err) != fault.Usage {
			t.Errorf("ParseTarget(%q) = %v, want a usage error", in, err)
		}
	}
}

func TestTargetProgress(t *testing.T) {
	view := func(applied, failed, outstanding, held int) *View {
		return &View{Totals: Totals{Applied: applied, Failed: failed, Outstanding: outstanding, Held: held, Unassigned: 7,
			Nodes: applied + failed + outstanding + held + 7}}
	}
	for _, c := range []struct {
		target    string
		v         *View
		need      int
		holds     bool
		reachable string // a substring of the error, "" for none
	}{
		{"all-applied", view(3, 0, 1, 5), 4, false, ""},
		{"all-applied", view(4, 0, 0, 5), 4, true, ""},
		{"applied=2", view(2, 1, 1, 0), 2, true, ""},
		{"applied=5", view(2, 0, 2, 9), 5, false, "--until applied=5 cannot hold: only 4 of the nodes in scope were assigned generation 7"},
		{"applied=50%", view(1, 0, 2, 0), 2, false, ""}, // at least half of 3
		{"applied=50%", view(2, 0, 2, 0), 2, true, ""},
		{"applied=1%", view(1, 0, 99, 0), 1, true, ""},
		// Held and unassigned nodes are never in scope: a gate over no
		// node never passes.
		{"all-applied", view(0, 0, 0, 5), 0, false, "no node in scope was assigned generation 7"},
		{"applied=10%", view(0, 0, 0, 5), 0, false, "no node in scope was assigned generation 7"},
	} {
		tg, err := ParseTarget(c.target)
		if err != nil {
			t.Fatal(err)
		}
		p := tg.Progress(c.v)
		err = p.Reachable(7)
		if p.Need != c.need || p.Holds() != c.holds || (err == nil) != (c.reachable == "") || err != nil && !strings.Contains(err.Error(), c.reachable) {
			t.Errorf("%s of %+v: need %d, holds %t, %v; want %d, %t, %q", c.target, c.v.Totals, p.Need, p.Holds(), err, c.need, c.holds, c.reachable)
		}
	}
}

func TestChanged(t *testing.T) {
	prev := &View{Nodes: []NodeStatus{{Name: "a", Status: Outstanding}, {Name: "b", Status: Outstanding}, {Name: "c", Status: Applied}}}
	cur := &View{Nodes: []NodeStatus{{Name: "a", Status: Applied}, {Name: "b", Status: Outstanding}, {Name: "c", Status: Failed}, {Name: "d", Status: Applied}}}
	var got []string
	for _, n := range Changed(prev, cur) {
		got = append(got, n.Name+" "+string(n.Status))
	}
	if strings.Join(got, ", ") != "a applied, c failed" {
		t.Errorf("Changed = %q", got)
	}
}

// TestSelectionPatterns: --nodes selects by shell pattern, as a role
// does, leaves decommissioned nodes out unless asked, and refuses a
// pattern that matches no enrolled node.
func TestSelectionPatterns(t *testing.T) {
	f, ids := cacheFixture(t)
	f.revoke(f.enrol("web-9", t0), t0.Add(time.Hour), "retired")
	s := f.load(false)
	names := func(sel Selection) string {
		t.Helper()
		v := f.view(s, 0, sel)
		var out []string
		for _, n := range v.Nodes {
			out = append(out, n.Name)
		}
		return strings.Join(out, " ")
	}
	for _, c := range []struct {
		sel  Selection
		want string
	}{
		{Selection{Patterns: []string{"web-*"}}, "web-1 web-2"},
		{Selection{Patterns: []string{"web-*"}, All: true}, "web-1 web-2 web-9"},
		{Selection{Patterns: []string{"web-?"}, Names: []string{"laptop", "web-9"}}, "laptop web-1 web-2 web-9"},
		{Selection{Patterns: []string{"db-*", "lap*"}}, "db-1 laptop"},
	} {
		if got := names(c.sel); got != c.want {
			t.Errorf("%+v selects %q, want %q", c.sel, got, c.want)
		}
	}
	// The flagged report of web-1 is listed for web-*, not for db-*.
	if v := f.view(s, 0, Selection{Patterns: []string{"web-*"}}); len(v.Flagged) != 1 || v.Flagged[0].NodeID != ids["web-1"].NodeID {
		t.Errorf("flagged for web-*: %+v", v.Flagged)
	}
	if v := f.view(s, 0, Selection{Patterns: []string{"db-*"}}); len(v.Flagged) != 0 {
		t.Errorf("flagged for db-*: %+v", v.Flagged)
	}
	if _, err := s.Generation(f.ctx, 0, Selection{Patterns: []string{"mail-*"}}); err == nil || err.Error() != "no enrolled node matches mail-*" {
		t.Errorf("a pattern that matches nothing: %v", err)
	}
}
