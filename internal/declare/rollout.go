package declare

import (
	"context"
	"fmt"

	"github.com/muster-tool/muster/internal/declaration"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/internal/mesh"
)

// A staged rollout is successive single writes: a generation declared for
// a wave (Options.Wave) gives a bundle only to the nodes in it. The other
// nodes the declaration selects are held: they get no bundle, so their
// hosts keep applying the generation they have (a host applies the newest
// generation with a bundle for it), and the manifest lists them as held
// with that generation, so that report shows them as held, not
// outstanding. A later declare for every node promotes the rest; it is
// compared, for each held node, with the generation it kept.

// Held is a node that the declaration selects but the wave leaves out.
type Held struct {
	Name   string `json:"name"`
	NodeID string `json:"node_id"`
	// Generation is the generation it keeps: the newest one assigned to
	// this identity before, 0 if none was.
	Generation uint64 `json:"generation"`
}

// heldNode is a held node in the plan.
type heldNode struct {
	name, nodeID string
	gen          uint64 // set by compare
}

// hold moves the nodes that wave w does not select from the plan's nodes
// to its held ones (w nil: the whole fleet, nothing is held). It refuses a
// wave that leaves no node the generation: such a generation would change
// nothing but the history.
func (p *plan) hold(w *declaration.Wave) error {
	if w == nil {
		return nil
	}
	p.wave = w.String()
	kept := p.nodes[:0]
	for _, np := range p.nodes {
		if w.Selects(declaration.Node{Name: np.id.Name, Labels: np.id.Labels}) {
			kept = append(kept, np)
			continue
		}
		p.held = append(p.held, heldNode{name: np.id.Name, nodeID: np.id.NodeID})
	}
	if len(kept) == 0 {
		return fault.WithHint(fmt.Errorf("wave %s selects none of the %d nodes the declaration gives a bundle to: nothing would be declared", p.wave, len(p.nodes)),
			"check the wave's nodes and labels, or the pattern, against muster enrol list")
	}
	clear(p.nodes[len(kept):])
	p.nodes = kept
	p.retable()
	return nil
}

// heldNames are the held nodes' names, sorted (the plan's nodes are).
func (p *plan) heldNames() []string {
	out := make([]string, len(p.held))
	for i, h := range p.held {
		out[i] = h.name
	}
	return out
}

// heldNames are the names of the nodes old held, as its manifest lists
// them (sorted).
func (o *oldManifest) heldNames() []string {
	out := make([]string, len(o.m.Held))
	for i, h := range o.m.Held {
		out[i] = h.Name
	}
	return out
}

// heldOn decides which generation each held node keeps, from the newest
// committed generation's manifest old: the generation itself if it gave
// the node's identity a bundle, the one old held it on if it held it too,
// and 0 (nothing yet) otherwise.
func (p *plan) heldOn(old *oldManifest) []Held {
	out := make([]Held, len(p.held))
	for i := range p.held {
		h := &p.held[i]
		h.gen = 0
		if old != nil {
			if on := old.byName[h.name]; on != nil && on.NodeID == h.nodeID {
				h.gen = old.gen
			} else if was, ok := old.held[h.name]; ok && was.NodeID == h.nodeID {
				h.gen = was.Generation
			}
		}
		out[i] = Held{Name: h.name, NodeID: h.nodeID, Generation: h.gen}
	}
	return out
}

// manifestHeld is the manifest's list of held nodes.
func (p *plan) manifestHeld() []generation.ManifestHeld {
	if len(p.held) == 0 {
		return nil
	}
	out := make([]generation.ManifestHeld, len(p.held))
	for i, h := range p.held {
		out[i] = generation.ManifestHeld{Name: h.name, NodeID: h.nodeID, Generation: h.gen}
	}
	return out
}

// keptManifests reads the manifests of the generations that prev, the
// newest committed generation's manifest, holds nodes on: a node held
// there and given a bundle now is compared with what it kept.
func keptManifests(ctx context.Context, m *mesh.Mesh, prev *generation.Manifest) (map[uint64]*generation.Manifest, error) {
	out := map[uint64]*generation.Manifest{}
	if prev == nil {
		return out, nil
	}
	for _, h := range prev.Held {
		if h.Generation == 0 || out[h.Generation] != nil {
			continue
		}
		man, err := ReadManifest(ctx, m, h.Generation)
		if err != nil {
			return nil, fmt.Errorf("generation %d held %s on generation %d: %w", prev.Generation, h.Name, h.Generation, err)
		}
		out[h.Generation] = man
	}
	return out, nil
}

// kept returns what a node that old held kept: its entry in the manifest
// of the generation it was held on, and that manifest, or nil.
func (o *oldManifest) kept(name string) (*generation.ManifestNode, *oldManifest, error) {
	was, ok := o.held[name]
	if !ok || was.Generation == 0 {
		return nil, nil, nil
	}
	k := o.keptOn[was.Generation]
	if k == nil {
		return nil, nil, nil
	}
	on := k.byName[name]
	if on == nil || on.NodeID != was.NodeID {
		return nil, nil, nil
	}
	return on, k, nil
}

// indexHeld indexes old's held nodes, and the manifests they were held on
// (kept, from keptManifests).
func (o *oldManifest) indexHeld(kept map[uint64]*generation.Manifest) error {
	o.held = make(map[string]generation.ManifestHeld, len(o.m.Held))
	for _, h := range o.m.Held {
		o.held[h.Name] = h
	}
	o.keptOn = map[uint64]*oldManifest{}
	for g, man := range kept {
		k, err := readOld(g, man)
		if err != nil {
			return err
		}
		o.keptOn[g] = k
	}
	return nil
}
