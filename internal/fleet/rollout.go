package fleet

import (
	"context"
	"sort"
	"time"
)

// Rollout is how one generation rolled out: where the selected nodes
// stand on it now, and how long after the declare each node that applied
// it did so, for telling a slow rollout from the ones before it.
type Rollout struct {
	HistoryEntry
	// AppliedAfter holds, for each node that applied the generation
	// (Applied now), how long after the generation was declared the
	// node's first passing report of it ended, shortest first. It has
	// Totals.Applied entries, so the share it reaches at the end is the
	// share applied now. A host whose clock is behind the mesh's can
	// make an entry negative.
	AppliedAfter []time.Duration
}

// Assigned counts the nodes the generation was assigned to: those that
// applied it, failed it or are outstanding on it.
func (t Totals) Assigned() int { return t.Applied + t.Failed + t.Outstanding }

// Rollouts returns the last generations up to generation upTo (0 means
// the newest committed), at most last of them, newest first, each with
// where the selected nodes stand on it now (by the rules of Generation)
// and when the ones that applied it did.
func (s *State) Rollouts(ctx context.Context, upTo uint64, last int, sel Selection) ([]Rollout, error) {
	want, err := s.selection(sel)
	if err != nil {
		return nil, err
	}
	if upTo == 0 {
		upTo = s.Newest()
	}
	b := s.Newest()
	var out []Rollout
	for i := len(s.gens) - 1; i >= 0 && len(out) < last; i-- {
		gen := s.gens[i]
		if gen > upTo {
			continue
		}
		c := s.cache.Commits[gen]
		man, err := s.manifest(ctx, gen)
		if err != nil {
			return nil, err
		}
		r := Rollout{HistoryEntry: HistoryEntry{Generation: gen, Run: c.Run, DeclaredAt: c.DeclaredAt, Manifest: man != nil}}
		if man != nil {
			r.Wave = man.wave
		}
		for _, name := range s.reg.Names() {
			n := s.reg.Nodes[name]
			if !want(n) {
				continue
			}
			ns := s.classify(gen, c, man, n)
			r.Totals.add(ns.Status)
			if ns.Status != Applied {
				continue
			}
			// classify found a counted passing report, so there is a
			// first one.
			f := firstPassed(s.cache.Nodes[ns.NodeID].Reports, gen, b, s.cache.Commits)
			r.AppliedAfter = append(r.AppliedAfter, fromUnixNano(f.ended()).Sub(c.DeclaredAt))
		}
		sort.Slice(r.AppliedAfter, func(i, j int) bool { return r.AppliedAfter[i] < r.AppliedAfter[j] })
		out = append(out, r)
	}
	s.save()
	return out, nil
}

// firstPassed returns the oldest counted report of generation gen that
// passed: the one that made the node applied first.
func firstPassed(fs []reportFact, gen, b uint64, commits map[uint64]commitFact) *reportFact {
	i := sort.Search(len(fs), func(i int) bool { return fs[i].Gen >= gen })
	for ; i < len(fs) && fs[i].Gen == gen; i++ {
		if f := &fs[i]; usable(f, b) && !forked(f, commits) && f.Passed {
			return f
		}
	}
	return nil
}
