package declare

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/internal/mesh"
	"github.com/muster-tool/muster/spool"
)

// ReadManifest reads and verifies the manifest of committed generation
// gen: the one its commit names.
func ReadManifest(ctx context.Context, m *mesh.Mesh, gen uint64) (*generation.Manifest, error) {
	c, err := generation.ReadCommit(ctx, m.Spool, gen, m.Verifier())
	if err != nil {
		return nil, err
	}
	return ManifestOf(ctx, m, c.Generation, c.Run)
}

// ManifestOf reads and verifies the manifest of generation gen written by
// run, the run gen's commit (already read and verified) names.
func ManifestOf(ctx context.Context, m *mesh.Mesh, gen uint64, run string) (*generation.Manifest, error) {
	name := spool.ManifestName(gen, run)
	data, err := m.Spool.Get(ctx, name, 0)
	if errors.Is(err, spool.ErrNotFound) {
		return nil, fault.WithHint(fmt.Errorf("generation %d is committed but its manifest %s is missing from spool %s", gen, name, m.Spool),
			"if the spool was copied, copy the rest of it (manifest/) too")
	}
	if err != nil {
		return nil, err
	}
	var man generation.Manifest
	if err := bundle.OpenTOML(data, generation.ManifestCtx(gen, run), m.Pair.Age, m.Verifier(), &man); err != nil {
		return nil, fmt.Errorf("manifest of generation %d: %w", gen, err)
	}
	if man.Generation != gen || man.Run != run {
		return nil, fmt.Errorf("manifest %s names generation %d of run %s", name, man.Generation, man.Run)
	}
	return &man, nil
}

// manifest builds the manifest of generation gen written by run.
func (p *plan) manifest(gen uint64, run string, now time.Time) *generation.Manifest {
	man := &generation.Manifest{
		Version: generation.FormatVersion, Generation: gen, Run: run, DeclaredAt: now,
		Nodes: make([]generation.ManifestNode, len(p.nodes)), Ineligible: p.ineligibleNames(), Unassigned: p.unmatched,
		Resources: make([]generation.ManifestResource, len(p.table)), Wave: p.wave, Held: p.manifestHeld(),
	}
	for i, e := range p.table {
		man.Resources[i] = generation.ManifestResource{ID: e.id, Digest: e.digest}
	}
	pos := make([]int, 0, 128)
	for i, np := range p.nodes {
		pos = pos[:0]
		for _, e := range np.entries {
			pos = append(pos, e.pos)
		}
		man.Nodes[i] = generation.ManifestNode{Name: np.id.Name, NodeID: np.id.NodeID, Digest: np.digest, Set: formatSet(pos)}
	}
	return man
}

// formatSet writes ascending positions as numbers and ranges:
// [0 1 2 5 7 8] is "0-2,5,7-8".
func formatSet(pos []int) string {
	var b strings.Builder
	for i := 0; i < len(pos); {
		j := i
		for j+1 < len(pos) && pos[j+1] == pos[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(pos[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(pos[j]))
		}
		i = j + 1
	}
	return b.String()
}

// parseSet reads what formatSet wrote, refusing positions that are not
// ascending or not below n.
func parseSet(s string, n int) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var out []int
	next := 0
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		b := a
		if err == nil && isRange {
			b, err = strconv.Atoi(hi)
		}
		if err != nil || a < next || b < a || b >= n {
			return nil, fmt.Errorf("bad resource set %q", s)
		}
		for x := a; x <= b; x++ {
			out = append(out, x)
		}
		next = b + 1
	}
	return out, nil
}

// oldManifest is the previous generation's manifest, indexed for diffs.
type oldManifest struct {
	gen    uint64
	m      *generation.Manifest
	byName map[string]*generation.ManifestNode
	// held indexes the nodes m held, and keptOn the manifests of the
	// generations they kept (rollout.go).
	held   map[string]generation.ManifestHeld
	keptOn map[uint64]*oldManifest
	// settings are the generation's settings by resource ID and digest,
	// read once by a dry run (settings.go).
	settings     map[string]*generation.SettingsResource
	settingsErr  error
	settingsRead bool
}

func readOld(gen uint64, m *generation.Manifest) (*oldManifest, error) {
	o := &oldManifest{gen: gen, m: m, byName: make(map[string]*generation.ManifestNode, len(m.Nodes))}
	for i := range m.Nodes {
		o.byName[m.Nodes[i].Name] = &m.Nodes[i]
	}
	if !slices.IsSortedFunc(m.Resources, func(a, b generation.ManifestResource) int { return strings.Compare(a.ID, b.ID) }) {
		return nil, fmt.Errorf("manifest of generation %d: resources are not sorted", gen)
	}
	return o, nil
}

// resources returns what node n was assigned, sorted by ID.
func (o *oldManifest) resources(n *generation.ManifestNode) ([]generation.ManifestResource, error) {
	if n.Set == "" && len(n.Resources) > 0 {
		out := make([]generation.ManifestResource, 0, len(n.Resources))
		for id, d := range n.Resources {
			out = append(out, generation.ManifestResource{ID: id, Digest: d})
		}
		slices.SortFunc(out, func(a, b generation.ManifestResource) int { return strings.Compare(a.ID, b.ID) })
		return out, nil
	}
	pos, err := parseSet(n.Set, len(o.m.Resources))
	if err != nil {
		return nil, fmt.Errorf("manifest of generation %d: node %s: %w", o.gen, n.Name, err)
	}
	out := make([]generation.ManifestResource, len(pos))
	for i, x := range pos {
		out[i] = o.m.Resources[x]
	}
	return out, nil
}
