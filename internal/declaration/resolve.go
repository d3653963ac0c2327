package declaration

import (
	"fmt"
	"path"
	"slices"
	"sort"

	"github.com/muster-tool/muster/internal/resource"
)

// Node is an enrolled node as resolution sees it.
type Node struct {
	Name   string
	Labels map[string]string
	// Facts are the facts of the node's newest briefing by name, for
	// templates (see brief.Facts.Map); nil when it has none.
	Facts map[string]any
	// FactsFrom is the muster version that sent that briefing, for
	// messages about a missing fact; empty if the node sent none.
	FactsFrom string
}

// Resolved is one node's desired state.
type Resolved struct {
	Node string
	// Resources are sorted by ID. Nodes resolve to shared memory: nodes
	// with the same roles and no node section share one slice, and file
	// content is never copied per node. Treat it as read-only.
	Resources []resource.Spec
	// Own is set when the node has a node section, so Resources was made
	// for it alone: no other node shares the slice.
	Own bool

	// What rendering the node's templated files needs (see Renderer).
	// Their Resources hold them unrendered, with no content: ResolveEach
	// leaves rendering to its caller, which renders only for the nodes
	// that get something. Resolve renders them.
	templates    []templated
	vars         map[string]any
	varConflicts []varConflict
	labels       map[string]string
	facts        map[string]any
	factsFrom    string
}

// templatedAt lists the positions in Resources of the files to be
// rendered from a template for this node, in order.
func (r Resolved) templatedAt() []int {
	if len(r.templates) == 0 {
		return nil
	}
	out := make([]int, len(r.templates))
	for i, t := range r.templates {
		out[i] = t.pos
	}
	return out
}

// String names the node and counts its resources; it never shows content.
func (r Resolved) String() string {
	return fmt.Sprintf("%s: %d resources", r.Node, len(r.Resources))
}

// combination is the merged resources of one set of roles. Nodes selected
// by the same roles share it, which keeps resolution fast for large
// fleets with few distinct role sets.
type combination struct {
	merged    []declared      // sorted by ID; the first role (by name) wins a conflict
	ids       []string        // merged's IDs
	specs     []resource.Spec // merged's specs
	conflicts []conflict
	// clashes: resources of different IDs that cannot both be applied
	// (resource.Clashes), in place order.
	clashes []conflict
	// For templates (combineTemplates): the templated files among
	// merged, and the vars of the top level and the roles.
	templates    []templated
	vars         map[string]any
	varConflicts []varConflict
}

// conflict is one resource declared differently in two places, or (as a
// clash) two resources that cannot both be applied.
type conflict struct {
	first, second declared
}

type conflictKey struct {
	id            string
	first, second place
}

// Resolve gives every node its resources, in the order of nodes (each name
// once). A node's resources are those of every role that selects it, with
// its node section's resources replacing any of the same ID and adding the
// rest, and its templated files rendered. Nodes that no role selects and
// no node section names are listed in unmatched as well, resolved to no
// resources. Problems are an error for each resource two roles declare
// differently for one node and each file that failed to render, and
// warnings for roles that select no node and node sections that name no
// node.
func (d *Declaration) Resolve(nodes []Node) (resolved []Resolved, unmatched []string, problems []Problem) {
	resolved = make([]Resolved, 0, len(nodes))
	rr := NewRenderer()
	unmatched, problems = d.ResolveEach(nodes, func(r Resolved) {
		if r.Own || len(r.templates) > 0 {
			r.Resources = append(make([]resource.Spec, 0, len(r.Resources)), r.Resources...)
		}
		rendered, _ := rr.Render(r)
		for _, x := range rendered {
			r.Resources[x.Pos] = x.Spec
		}
		r.templates, r.vars, r.varConflicts, r.labels, r.facts, r.factsFrom = nil, nil, nil, nil, nil, ""
		resolved = append(resolved, r)
	})
	if ps := rr.Problems(); len(ps) > 0 {
		problems = append(problems, ps...)
		sortProblems(problems)
	}
	return resolved, unmatched, problems
}

// ResolveEach is Resolve that hands each node's resolution to yield as it
// is made instead of keeping them all, and leaves its templated files
// unrendered: the caller renders them (Renderer) for the nodes it gives
// them to. Where every node has a node section,
// every node's resources are a copy of its roles' with its own merged in:
// for ten thousand nodes of a hundred resources, hundreds of megabytes if
// kept at once. ResolveEach makes each copy in one buffer that it reuses,
// so the Resources of an Own node are valid only until yield returns.
func (d *Declaration) ResolveEach(nodes []Node, yield func(Resolved)) (unmatched []string, problems []Problem) {
	type conflictSeen struct {
		c     conflict
		clash bool
		node  string
		count int
	}
	var (
		selected    = make([]int, len(d.roles))
		combos      = map[string]*combination{}
		named       = map[string]bool{}
		seen        = make(map[string]bool, len(nodes))
		conflicts   = map[conflictKey]*conflictSeen{}
		conflictSeq []*conflictSeen
		bits        = make([]byte, (len(d.roles)+7)/8)
		own         []resource.Spec // the buffer of Own nodes' resources
		ownT        []templated     // and of their templated files
	)
	for _, n := range nodes {
		if seen[n.Name] {
			continue
		}
		seen[n.Name] = true
		clear(bits)
		matched := false
		for i, r := range d.roles {
			if r.selects(n) {
				bits[i/8] |= 1 << (i % 8)
				selected[i]++
				matched = true
			}
		}
		sec := d.nodes[n.Name]
		if sec != nil {
			named[n.Name] = true
		}
		if !matched && sec == nil {
			unmatched = append(unmatched, n.Name)
			yield(Resolved{Node: n.Name})
			continue
		}
		c := combos[string(bits)]
		if c == nil {
			c = d.combine(bits)
			combos[string(bits)] = c
		}
		specs, clashes := c.specs, c.clashes
		r := Resolved{Node: n.Name, Own: sec != nil, templates: c.templates, vars: c.vars, varConflicts: c.varConflicts}
		if sec != nil {
			own = override(own[:0], c.ids, c.specs, sec.res)
			specs = own
			if d.mixedPaths {
				clashes = ownClashes(own, c, sec)
			}
			if d.templated {
				ownT = ownTemplates(ownT[:0], c, sec)
				r.templates = ownT
				if len(ownT) > 0 {
					r.vars, r.varConflicts = ownVars(c, sec)
				}
			}
		}
		if len(r.templates) > 0 {
			r.labels, r.facts, r.factsFrom = n.Labels, n.Facts, n.FactsFrom
		}
		for _, cf := range clashes {
			k := conflictKey{cf.first.id + "\x00" + cf.second.id, cf.first.at, cf.second.at}
			cs := conflicts[k]
			if cs == nil {
				cs = &conflictSeen{c: cf, clash: true, node: n.Name}
				conflicts[k] = cs
				conflictSeq = append(conflictSeq, cs)
			}
			cs.count++
		}
		for _, cf := range c.conflicts {
			if sec != nil {
				if _, replaced := sec.byID[cf.first.id]; replaced {
					continue // the node's own declaration settles it
				}
			}
			k := conflictKey{cf.first.id, cf.first.at, cf.second.at}
			cs := conflicts[k]
			if cs == nil {
				cs = &conflictSeen{c: cf, node: n.Name}
				conflicts[k] = cs
				conflictSeq = append(conflictSeq, cs)
			}
			cs.count++
		}
		r.Resources = specs
		yield(r)
	}

	for _, cs := range conflictSeq {
		who := nodesWho(cs.node, cs.count)
		a, b := cs.c.first, cs.c.second
		msg := fmt.Sprintf("%s: %s is declared differently by %s here and by %s at %s", who, b.id, b.by, a.by, a.at)
		if cs.clash {
			msg = fmt.Sprintf("%s: %s is declared as a %s by %s here and as a %s by %s at %s; a path has one type", who, b.spec.Path, b.spec.Kind, b.by, a.spec.Kind, a.by, a.at)
		}
		problems = append(problems, Problem{File: b.at.file, Line: b.at.line, Key: b.key, Message: msg})
	}
	for i, r := range d.roles {
		if selected[i] == 0 {
			problems = append(problems, Problem{
				File: r.at.file, Line: r.at.line, Key: r.key, Warning: true,
				Message: fmt.Sprintf("role %s selects none of the %d nodes", r.name, len(seen)),
			})
		}
	}
	for name, sec := range d.nodes {
		if !named[name] {
			problems = append(problems, Problem{
				File: sec.at.file, Line: sec.at.line, Key: sec.key, Warning: true,
				Message: fmt.Sprintf("no node named %s is enrolled; this section applies to nothing", name),
			})
		}
	}
	sortProblems(problems)
	return unmatched, problems
}

// nodesWho names the nodes a problem is for: the first, and how many more.
func nodesWho(first string, count int) string {
	if count > 1 {
		return fmt.Sprintf("node %s and %d more", first, count-1)
	}
	return "node " + first
}

// selects reports whether the role selects node n: its name matches one of
// the role's patterns (if any) and it carries every one of the role's
// labels (if any).
func (r *role) selects(n Node) bool {
	for _, l := range r.labels {
		if got, ok := n.Labels[l[0]]; !ok || got != l[1] {
			return false
		}
	}
	if len(r.globs) == 0 {
		return true
	}
	for _, g := range r.globs {
		if ok, _ := path.Match(g, n.Name); ok {
			return true
		}
	}
	return false
}

// combine merges the resources of the roles whose bits are set.
func (d *Declaration) combine(bits []byte) *combination {
	c := &combination{}
	index := map[string]int{}
	for i, r := range d.roles {
		if bits[i/8]&(1<<(i%8)) == 0 {
			continue
		}
		for _, res := range r.res {
			if j, dup := index[res.id]; dup {
				if !sameDeclared(&c.merged[j], &res) {
					c.conflicts = append(c.conflicts, conflict{first: c.merged[j], second: res})
				}
				continue
			}
			index[res.id] = len(c.merged)
			c.merged = append(c.merged, res)
		}
	}
	sort.Slice(c.merged, func(i, j int) bool { return c.merged[i].id < c.merged[j].id })
	c.ids = make([]string, len(c.merged))
	c.specs = make([]resource.Spec, len(c.merged))
	for i, m := range c.merged {
		c.ids[i], c.specs[i] = m.id, m.spec
	}
	if d.mixedPaths {
		for _, cl := range resource.Clashes(c.specs) {
			first, second := inPlaceOrder(c.merged[cl.First], c.merged[cl.Second])
			c.clashes = append(c.clashes, conflict{first, second})
		}
	}
	if d.templated {
		d.combineTemplates(c, bits)
	}
	return c
}

// ownClashes finds the clashes in the resources of a node with a section
// of its own, own (c's merged with sec's), naming where each was declared.
func ownClashes(own []resource.Spec, c *combination, sec *nodeSection) []conflict {
	var out []conflict
	where := func(s *resource.Spec) declared {
		id := s.ID()
		if d, ok := sec.byID[id]; ok {
			return d
		}
		return c.merged[sort.SearchStrings(c.ids, id)]
	}
	for _, cl := range resource.Clashes(own) {
		first, second := inPlaceOrder(where(&own[cl.First]), where(&own[cl.Second]))
		out = append(out, conflict{first, second})
	}
	return out
}

// override merges a node section over a role combination, both sorted by
// ID: the node's resource wins where both have one ID. Runs of the
// combination between the node's resources are copied in bulk, which keeps
// a fleet where every node has a section fast. It appends to out, so that
// ResolveEach can reuse one buffer for every node.
func override(out []resource.Spec, ids []string, specs []resource.Spec, node []declared) []resource.Spec {
	out = slices.Grow(out, len(specs)+len(node))
	i := 0
	for _, n := range node {
		k := i + sort.SearchStrings(ids[i:], n.id)
		out = append(out, specs[i:k]...)
		out = append(out, n.spec)
		i = k
		if k < len(ids) && ids[k] == n.id {
			i++
		}
	}
	return append(out, specs[i:]...)
}
