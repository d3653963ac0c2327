package fleet

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/muster-tool/muster/internal/fault"
)

// A pipeline's gate (report --wait) polls: it loads the state once and
// refreshes it, each refresh listing the reports and reading only the new
// ones, until a target holds for the nodes in scope, a node in scope
// fails, or time runs out. The nodes in scope are those of the view's
// selection that the generation was assigned to: applied, failed or
// outstanding. Held, ineligible, unassigned and decommissioned nodes are
// never waited for, and outstanding is never taken for failed.

// Refresh reads what is new in the spool since the state was loaded or
// last refreshed, starting from the facts it holds: the reports it read
// are not read again, whatever the cache on disk says. Warnings and Stats
// are those of this refresh alone. The registry stays the one the state
// was loaded with. After an error the state is not to be used again: Load
// a new one.
func (s *State) Refresh(ctx context.Context) error {
	s.gens, s.unknown, s.Forks, s.Warnings, s.Stats = nil, nil, nil, nil, Stats{}
	ctx, cancel := context.WithCancel(ctx)
	l := startListing(ctx, s.mesh.Spool, s.briefs)
	defer l.wait()
	defer cancel()
	l.setNodes(s.cache.Nodes)
	return s.read(ctx, l)
}

// Target is what a wait waits for: applied=N, at least N of the nodes in
// scope applied the generation; applied=P%, at least P percent of them;
// all-applied, every one of them.
type Target struct {
	n       int // a count, or with percent a percentage
	percent bool
	all     bool
}

// ParseTarget reads a target as report --until gives it.
func ParseTarget(s string) (Target, error) {
	if s == "all-applied" {
		return Target{all: true}, nil
	}
	v, ok := strings.CutPrefix(s, "applied=")
	if !ok {
		return Target{}, fault.Usagef("--until %q: want applied=N, applied=P%% or all-applied", s)
	}
	p, percent := strings.CutSuffix(v, "%")
	n, err := strconv.Atoi(p)
	switch {
	case err != nil || n < 1:
		return Target{}, fault.Usagef("--until %q: want a number of nodes, 1 or more, or a percentage", s)
	case percent && n > 100:
		return Target{}, fault.Usagef("--until %q: a percentage is at most 100%%", s)
	}
	return Target{n: n, percent: percent}, nil
}

// String is the target as --until gives it.
func (t Target) String() string {
	switch {
	case t.all:
		return "all-applied"
	case t.percent:
		return fmt.Sprintf("applied=%d%%", t.n)
	}
	return fmt.Sprintf("applied=%d", t.n)
}

// Progress is where the nodes in scope of a view stand against a target.
type Progress struct {
	Target Target
	// Assigned are the nodes in scope: the selected nodes the generation
	// was assigned to, each applied, failed or outstanding.
	Assigned, Applied, Failed, Outstanding int
	// Need is how many of them must have applied for the target to hold.
	Need int
}

// Progress measures view v against the target.
func (t Target) Progress(v *View) Progress {
	p := Progress{Target: t, Applied: v.Totals.Applied, Failed: v.Totals.Failed, Outstanding: v.Totals.Outstanding}
	p.Assigned = p.Applied + p.Failed + p.Outstanding
	switch {
	case t.all:
		p.Need = p.Assigned
	case t.percent:
		p.Need = (t.n*p.Assigned + 99) / 100
	default:
		p.Need = t.n
	}
	return p
}

// Holds reports whether the target holds: enough nodes in scope applied
// the generation, and there is at least one in scope. A gate over no node
// at all never passes.
func (p Progress) Holds() bool { return p.Assigned > 0 && p.Applied >= p.Need }

// Reachable fails when the target can never hold for generation gen:
// no node in scope was assigned it, or fewer than the target needs. The
// manifest fixed who was assigned when the generation was declared, so
// waiting would not change that.
func (p Progress) Reachable(gen uint64) error {
	switch {
	case p.Assigned == 0:
		return fault.WithHint(fmt.Errorf("no node in scope was assigned generation %d: there is nothing to wait for", gen),
			"see where the nodes stand with: muster report --generation "+strconv.FormatUint(gen, 10)+" --all")
	case p.Need > p.Assigned:
		return fault.WithHint(fmt.Errorf("--until %s cannot hold: only %d of the nodes in scope were assigned generation %d", p.Target, p.Assigned, gen),
			"ask for fewer nodes, a percentage, or all-applied")
	}
	return nil
}

// Changed lists the nodes of cur whose status differs from what it was in
// prev (nodes prev does not have are left out), in cur's order.
func Changed(prev, cur *View) []*NodeStatus {
	was := make(map[string]Status, len(prev.Nodes))
	for _, n := range prev.Nodes {
		was[n.Name] = n.Status
	}
	var out []*NodeStatus
	for i := range cur.Nodes {
		n := &cur.Nodes[i]
		if s, ok := was[n.Name]; ok && s != n.Status {
			out = append(out, n)
		}
	}
	return out
}
