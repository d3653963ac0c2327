package fleet

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/enrol"
	"github.com/muster-tool/muster/internal/outcome"
)

// factFleet is a mesh of nodes over gens generations for the page at a
// size no test can seal reports for (ten thousand nodes over fifty
// generations are half a million reports): its State is built from the
// facts the report cache holds once reports are verified, so every view
// of it goes through the same classification as a loaded one. The
// generations are declared six hours apart; the page is made two hours
// after the newest. Most nodes apply within an hour of a declare, a few
// (laptops) days later, a few fail with a long reason, a few are
// ineligible or unassigned; the newest generation is still rolling out.
type factFleet struct {
	State *State
	Made  time.Time
}

// failedDetail is the reason the failing nodes of factFleet give: long,
// as apt's are.
const failedDetail = "E: Unable to locate package muster-demo-tool; the package is not in any source the host has: " +
	"check the repository the declaration names and that `apt-get update` ran (Hit:1 file:/srv/repo stable InRelease)"

func newFactFleet(t testing.TB, nodes, gens int) *factFleet {
	t.Helper()
	rng := rand.New(rand.NewPCG(20, 26))
	reg := &enrol.Registry{Identities: map[string]*enrol.Identity{}, Nodes: map[string]*enrol.Node{}}
	s := &State{reg: reg, cache: newCache("spool", "mesh"), strIdx: map[string]uint32{}}
	declared := func(g int) time.Time { return t0.Add(time.Duration(g-1) * 6 * time.Hour) }
	made := declared(gens).Add(2 * time.Hour)
	type node struct {
		name, id           string
		laptop, ineligible bool
		unassigned, fails  bool
	}
	all := make([]node, nodes)
	for i := range all {
		n := node{name: fmt.Sprintf("node-%05d", i), id: fmt.Sprintf("%032x", i+1)}
		switch r := rng.IntN(1000); {
		case r < 20:
			n.laptop = true
		case r < 25:
			n.ineligible = true
		case r < 30:
			n.unassigned = true
		case r < 35:
			n.fails = true
		}
		all[i] = n
		id := &enrol.Identity{NodeID: n.id, Name: n.name, AdmittedAt: t0.Add(-time.Hour)}
		reg.Identities[n.id] = id
		reg.Nodes[n.name] = &enrol.Node{Name: n.name, Current: id}
		s.cache.Nodes[n.id] = &nodeFacts{}
	}
	for g := 1; g <= gens; g++ {
		gen := uint64(g)
		at := declared(g)
		s.cache.Commits[gen] = commitFact{Run: fmt.Sprintf("run%04d", g), DeclaredAt: at}
		mf := manifestFact{Run: s.cache.Commits[gen].Run}
		for _, n := range all {
			switch {
			case n.ineligible:
				mf.Ineligible = append(mf.Ineligible, s.cache.intern(s.strIdx, n.name))
				continue
			case n.unassigned:
				mf.Unassigned = append(mf.Unassigned, s.cache.intern(s.strIdx, n.name))
				continue
			}
			mf.Names = append(mf.Names, s.cache.intern(s.strIdx, n.name))
			mf.IDs = append(mf.IDs, s.cache.intern(s.strIdx, n.id))
			// A timer every 30 minutes, give or take; a laptop is
			// opened within a few days.
			delay := time.Duration(rng.ExpFloat64() * float64(20*time.Minute))
			if n.laptop {
				delay = time.Duration(rng.Float64() * float64(96*time.Hour))
			}
			end := at.Add(delay + 40*time.Second)
			if end.After(made) {
				continue
			}
			f := reportFact{Gen: gen, Seq: 1, Passed: true, Muster: "1.0.0",
				Start: unixNano(end.Add(-40 * time.Second)), End: unixNano(end)}
			if n.fails && g == gens {
				f.Passed = false
				f.More = &reportMore{Failed: []outcome.Line{{ID: "package:muster-demo-tool", Status: outcome.Failed, Detail: failedDetail}}}
			}
			nf := s.cache.Nodes[n.id]
			nf.Reports = append(nf.Reports, f)
		}
		s.cache.Manifests[gen] = mf
		s.gens = append(s.gens, gen)
	}
	for _, n := range all {
		if n.ineligible {
			s.cache.Nodes[n.id].Brief = &briefFact{Seq: 1, Time: unixNano(t0),
				Failed: []outcome.Line{{ID: "free-root", Status: outcome.Failed, Detail: "1 GiB free on /, the config asks for 2 GiB"}}}
		}
	}
	return &factFleet{State: s, Made: made}
}

var (
	bigOnce  sync.Once
	bigFleet *factFleet
	bigPage  string
)

// bigFleetPage returns the fleet of 10,000 nodes over 50 generations and
// its page, made once for the tests and benchmarks that need them.
func bigFleetPage(t testing.TB) (*factFleet, string) {
	t.Helper()
	bigOnce.Do(func() {
		bigFleet = newFactFleet(t, 10000, 50)
		bigPage, _ = renderPage(t, bigFleet.State, 0, Selection{}, bigFleet.Made)
	})
	if bigFleet == nil {
		t.Fatal("the fleet of 10,000 nodes could not be made")
	}
	return bigFleet, bigPage
}
