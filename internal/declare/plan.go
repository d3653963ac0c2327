package declare

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/muster-tool/muster/internal/brief"
	"github.com/muster-tool/muster/internal/declaration"
	"github.com/muster-tool/muster/internal/enrol"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/internal/keys"
	"github.com/muster-tool/muster/internal/outcome"
	"github.com/muster-tool/muster/internal/report"
	"github.com/muster-tool/muster/internal/resource"
	"github.com/muster-tool/muster/internal/tomlfile"
	"github.com/muster-tool/muster/internal/workpool"
)

// plan is a resolved declaration ready to be compared and written: what
// each eligible node gets, and who gets nothing new.
type plan struct {
	prune      bool
	nodes      []nodePlan // sorted by name
	table      []*entry   // every distinct resource the nodes have, in manifest order
	ineligible []Ineligible
	unmatched  []string
	unsealable []Unsealable // sorted by name
	warnings   []string
	// wave is the part of the fleet the generation is for, empty for all
	// of it; held are the nodes it leaves out (rollout.go).
	wave string
	held []heldNode // sorted by name
	// sources are where compare found each changed node's old
	// resources, by name, for a dry run's explain.
	sources map[string]changeSource
}

type nodePlan struct {
	id      *enrol.Identity
	entries []*entry // sorted by ID
	digest  string
}

// entry is one distinct resource as declared: its ID, the digest of its
// settings and its TOML form in a node's declaration, each computed once
// however many nodes have it. A fleet of ten thousand nodes with a
// hundred resources each usually has a few hundred distinct ones.
type entry struct {
	spec   resource.Spec // shares its strings with the declaration
	used   bool          // some eligible node has it
	id     string
	digest string
	line   []byte // "id digest\n", for the node's digest
	toml   []byte
	pos    int // in plan.table, which is the manifest's resource list
	// cost is the most the resource can add to the node's report.
	cost int
}

// newPlan resolves decl for every trusted node and splits eligible nodes
// from ineligible and unmatched ones. A resolution error (the same
// resource declared differently for one node) is a *ProblemsError.
func newPlan(ctx context.Context, reg *enrol.Registry, briefs map[string]*brief.Briefing, decl *declaration.Declaration) (*plan, error) {
	active := reg.Active()
	nodes := make([]declaration.Node, len(active))
	byName := make(map[string]*enrol.Identity, len(active))
	for i, id := range active {
		nodes[i] = declaration.Node{Name: id.Name, Labels: id.Labels}
		byName[id.Name] = id
		if b := briefs[id.NodeID]; b != nil && decl.Templated() {
			nodes[i].FactsFrom = b.Muster
			if b.Facts != nil {
				nodes[i].Facts = b.Facts.Map()
			}
		}
	}
	p := &plan{prune: decl.Prune(), nodes: make([]nodePlan, 0, len(active)), ineligible: []Ineligible{}, unmatched: []string{}, unsealable: []Unsealable{}}
	b := &planner{ctx: ctx, p: p, cache: newEntryCache(), bases: newEntryCache(), shared: map[*resource.Spec]sharedList{}}
	// Each node's resources are turned into entries as they are resolved
	// and then dropped: with a node section of its own, each node's are a
	// copy, and ten thousand nodes' copies at once would be most of the
	// memory declare needs. Templated files are rendered for the nodes
	// that get something, and every node's render problems are collected
	// before any is reported.
	rr := declaration.NewRenderer()
	unmatched, problems := decl.ResolveEach(nodes, func(r declaration.Resolved) {
		id := byName[r.Node]
		if in, ok := ineligible(id, briefs[id.NodeID]); ok {
			p.ineligible = append(p.ineligible, in)
			return
		}
		if b.err != nil {
			return
		}
		rendered, ok := rr.Render(r)
		if ok {
			b.add(id, r, rendered)
		}
	})
	if rp := rr.Problems(); len(rp) > 0 {
		problems = append(problems, rp...)
		declaration.SortProblems(problems)
	}
	if declaration.HasErrors(problems) {
		return nil, &ProblemsError{Problems: problems}
	}
	// A refused declaration is reported before any resource that failed
	// to encode, as it was when resolving finished before entries began.
	if b.err != nil {
		return nil, b.err
	}
	for _, pr := range problems {
		p.warnings = append(p.warnings, pr.String())
	}
	p.dropUnmatched(unmatched)
	p.makeTable(b.cache)
	return p, nil
}

// ineligible returns why a node gets nothing new, if it does not: it sent
// no briefing, or a briefing with failed lines.
func ineligible(id *enrol.Identity, b *brief.Briefing) (Ineligible, bool) {
	switch {
	case b == nil:
		return Ineligible{Name: id.Name, Failed: []outcome.Line{{ID: "briefing", Status: outcome.Failed, Detail: "no briefing received from identity " + id.NodeID}}}, true
	case !b.Eligible():
		return Ineligible{Name: id.Name, Failed: outcome.FailedLines(b.Lines)}, true
	}
	return Ineligible{}, false
}

// planner adds eligible nodes to a plan one at a time, as they are
// resolved.
type planner struct {
	ctx   context.Context
	p     *plan
	cache *entryCache
	// bases holds the entries of templated files as declared, without
	// content: never a node's, only what a rendered entry is made from.
	bases *entryCache
	// Nodes with the same roles and no node section of their own share
	// one resolved slice, and so share its entries and digest.
	shared map[*resource.Spec]sharedList
	err    error // the first error; no node is added after it
}

// sharedList is what the nodes that share one resolved slice share.
type sharedList struct {
	entries []*entry
	digest  string
	err     error // over the report budget
}

// add adds the eligible node id, resolved to r, with its templated files
// as rendered for it. r.Resources is not kept: an Own node's is reused
// for the next node.
//
// Nodes that share a resolved slice share its entries; a node's rendered
// files are the only entries made for it alone, so templates cost in
// proportion to what they make differ.
func (b *planner) add(id *enrol.Identity, r declaration.Resolved, rendered []declaration.Rendered) {
	if b.err != nil {
		return
	}
	var first *resource.Spec
	if len(r.Resources) > 0 && !r.Own {
		first = &r.Resources[0]
	}
	l, ok := b.shared[first]
	if !ok || first == nil || len(l.entries) != len(r.Resources) {
		if l, ok = b.list(r, rendered); !ok {
			return
		}
		if first != nil {
			// Only a shared slice is remembered: an Own node's is never
			// seen again, and remembering it would keep every node's
			// alive.
			b.shared[first] = l
		}
	}
	if l.err != nil {
		b.err = fmt.Errorf("node %s: %w", r.Node, l.err)
		return
	}
	np := nodePlan{id: id, entries: l.entries, digest: l.digest}
	if len(rendered) > 0 {
		np.entries = slices.Clone(l.entries)
		for _, x := range rendered {
			base, err := b.bases.get(&r.Resources[x.Pos])
			if err != nil {
				b.err = fmt.Errorf("node %s: %w", r.Node, err)
				return
			}
			e, err := b.cache.rendered(&x.Spec, base)
			if err != nil {
				b.err = fmt.Errorf("node %s: %w", r.Node, err)
				return
			}
			e.used = true
			np.entries[x.Pos] = e
		}
		sortByID(np.entries)
		np.digest = nodeDigest(b.p.prune, np.entries)
	}
	b.p.nodes = append(b.p.nodes, np)
}

// list makes the entries of r's resources, leaving a hole where a file
// is rendered per node (rendered says where), and their digest when
// there is no hole. It reports false when it stopped with b.err.
func (b *planner) list(r declaration.Resolved, rendered []declaration.Rendered) (sharedList, bool) {
	entries := make([]*entry, len(r.Resources))
	cost, next := 0, 0
	for i := range r.Resources {
		if i%4096 == 0 && b.ctx.Err() != nil {
			b.err = b.ctx.Err()
			return sharedList{}, false
		}
		s := &r.Resources[i]
		if next < len(rendered) && rendered[next].Pos == i {
			// What a resource can add to the report does not depend on
			// its content.
			next++
			cost += report.ResourceCost(s.ID(), string(s.Kind), s.Path, s.Name)
			continue
		}
		e, err := b.cache.get(s)
		if err != nil {
			b.err = fmt.Errorf("node %s: %w", r.Node, err)
			return sharedList{}, false
		}
		entries[i] = e
		e.used = true
		cost += e.cost
	}
	if err := reportBudget(len(entries), cost); err != nil {
		return sharedList{entries: entries, err: err}, true
	}
	if len(rendered) > 0 {
		return sharedList{entries: entries}, true
	}
	sortByID(entries)
	return sharedList{entries: entries, digest: nodeDigest(b.p.prune, entries)}, true
}

// sortByID sorts a node's entries by ID. Resolve sorts by ID; the
// manifest's ranges and the diff rely on it, so make sure rather than
// assume.
func sortByID(entries []*entry) {
	if !slices.IsSortedFunc(entries, byID) {
		slices.SortFunc(entries, byID)
	}
}

// reportBudget refuses a node whose n resources could need cost bytes of
// its report, more than report.NodeBudget: its host could not report
// them, and the node would look outstanding for ever.
func reportBudget(n, cost int) error {
	if cost <= report.NodeBudget {
		return nil
	}
	return fault.WithHint(fmt.Errorf("its %d resources could take up to %d bytes of its report, more than %d, the cap on a node's share of its report (a report holds at most %d MiB)",
		n, cost, report.NodeBudget, report.MaxSize>>20),
		"declare fewer resources for the node, or shorter paths and names, so that its host can report what it did")
}

// dropUnmatched moves the eligible nodes that nothing is declared for
// from the plan's nodes to its unmatched ones, in order: which they are is
// known only once every node is resolved.
func (p *plan) dropUnmatched(unmatched []string) {
	if len(unmatched) == 0 {
		return
	}
	isUnmatched := make(map[string]bool, len(unmatched))
	for _, n := range unmatched {
		isUnmatched[n] = true
	}
	kept := p.nodes[:0]
	for _, np := range p.nodes {
		if isUnmatched[np.id.Name] {
			p.unmatched = append(p.unmatched, np.id.Name)
			continue
		}
		kept = append(kept, np)
	}
	p.nodes = kept
}

// makeTable lists every distinct resource some eligible node has, in
// manifest order, and numbers the entries by it.
func (p *plan) makeTable(c *entryCache) {
	for _, es := range c.byID {
		for _, e := range es {
			if e.used {
				p.table = append(p.table, e)
			}
		}
	}
	slices.SortFunc(p.table, func(a, b *entry) int {
		if c := strings.Compare(a.id, b.id); c != 0 {
			return c
		}
		return strings.Compare(a.digest, b.digest)
	})
	for i, e := range p.table {
		e.pos = i
	}
}

func byID(a, b *entry) int { return strings.Compare(a.id, b.id) }

// vetNew moves the nodes whose age key nothing can be sealed to from the
// plan's nodes to its unsealable ones, before anything is compared or
// written, so that a dry run shows them and an unchanged declaration stays
// unchanged. A node that prev, the newest committed generation, assigned
// under the same identity was sealed to then, and an identity's keys never
// change: only the others are checked, which in a settled fleet is none.
func (p *plan) vetNew(ctx context.Context, prev *generation.Manifest) error {
	sealed := map[string]bool{}
	if prev != nil {
		sealed = make(map[string]bool, len(prev.Nodes))
		for _, n := range prev.Nodes {
			sealed[n.NodeID] = true
		}
	}
	var todo []int
	for i, np := range p.nodes {
		if !sealed[np.id.NodeID] {
			todo = append(todo, i)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	reasons := make([]string, len(p.nodes))
	err := workpool.Run(ctx, len(todo), runtime.GOMAXPROCS(0), func(j int) error {
		i := todo[j]
		r, err := p.nodes[i].id.Host.Recipient()
		if err == nil {
			err = keys.VetRecipient(r)
		}
		if err != nil {
			reasons[i] = err.Error()
		}
		return nil
	})
	if err != nil {
		return err
	}
	p.drop(reasons)
	return nil
}

// drop moves node i from the plan's nodes to its unsealable ones, with
// the reason, for each reasons[i] that is not empty, and takes out of the
// manifest's table the resources no node has any more.
func (p *plan) drop(reasons []string) {
	kept, n := p.nodes[:0], len(p.unsealable)
	for i, np := range p.nodes {
		if reasons[i] == "" {
			kept = append(kept, np)
			continue
		}
		p.unsealable = append(p.unsealable, Unsealable{Name: np.id.Name, NodeID: np.id.NodeID, Reason: reasons[i]})
	}
	if len(p.unsealable) == n {
		return
	}
	clear(p.nodes[len(kept):])
	p.nodes = kept
	slices.SortFunc(p.unsealable, func(a, b Unsealable) int { return strings.Compare(a.Name, b.Name) })
	p.retable()
}

// retable takes out of the manifest's table the resources no node of the
// plan has any more.
func (p *plan) retable() {
	used := map[*entry]bool{}
	for _, np := range p.nodes {
		for _, e := range np.entries {
			used[e] = true
		}
	}
	table := p.table[:0]
	for _, e := range p.table {
		if used[e] {
			e.pos = len(table)
			table = append(table, e)
		}
	}
	clear(p.table[len(table):])
	p.table = table
}

// ineligibleNames are the nodes the manifest lists as ineligible: those
// whose briefing failed and those whose bundle cannot be sealed, by name.
func (p *plan) ineligibleNames() []string {
	out := names(p.ineligible)
	if len(p.unsealable) == 0 {
		return out
	}
	for _, u := range p.unsealable {
		out = append(out, u.Name)
	}
	slices.Sort(out)
	return out
}

// nodeDigest covers everything a node's declaration depends on besides
// its identity and the recovery copy: the prune option and every
// resource's settings.
func nodeDigest(prune bool, entries []*entry) string {
	h := sha256.New()
	fmt.Fprintf(h, "prune=%t\n", prune)
	for _, e := range entries {
		h.Write(e.line)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// entryCache finds the entry of a spec by value: equal specs, such as the
// role resources that a node section keeps, share one entry. Candidates
// are found by type, path or name, and content, then compared field by
// field, which is quick for the copies a node section makes: their
// strings share memory.
type entryCache struct {
	byID map[idKey][]*entry
	// Reused for every new entry: a fleet where each node has resources
	// of its own has as many entries as nodes.
	buf  bytes.Buffer
	toml *toml.Encoder
	json *json.Encoder
	one  [1]resource.Spec
}

type idKey struct {
	kind    resource.Kind
	name    string // path or name
	content string
}

func newEntryCache() *entryCache {
	c := &entryCache{byID: map[idKey][]*entry{}}
	c.toml = toml.NewEncoder(&c.buf)
	c.json = json.NewEncoder(&c.buf)
	return c
}

func (c *entryCache) get(s *resource.Spec) (*entry, error) {
	k := idKey{s.Kind, s.Path, s.Content}
	if !s.Kind.HasPath() {
		k.name = s.Name
	}
	for _, e := range c.byID[k] {
		if sameSpec(&e.spec, s) {
			return e, nil
		}
	}
	e, err := c.newEntry(s)
	if err != nil {
		return nil, err
	}
	c.byID[k] = append(c.byID[k], e)
	return e, nil
}

func (c *entryCache) newEntry(s *resource.Spec) (*entry, error) {
	c.buf.Reset()
	c.one[0] = *s
	if err := c.toml.Encode(resourceTable{Resources: c.one[:]}); err != nil {
		return nil, fmt.Errorf("resource %s: encoding as TOML: %w", s.ID(), err)
	}
	e := &entry{spec: *s, id: s.ID(), toml: bytes.Clone(c.buf.Bytes())}
	e.cost = report.ResourceCost(e.id, string(s.Kind), s.Path, s.Name)
	e.digest = specDigest(&c.buf, c.json, s)
	e.line = []byte(e.id + " " + e.digest + "\n")
	return e, nil
}

// rendered returns the entry of s, a file rendered from a template for a
// node, given base, the entry of the same file as declared, without
// content. Its TOML is base's with the content added, which spares
// encoding by reflection the one resource per node that differs: the
// order of a table's keys means nothing in TOML.
// TestRenderedEntryIsTheSpecs checks that it decodes as s.
func (c *entryCache) rendered(s *resource.Spec, base *entry) (*entry, error) {
	k := idKey{s.Kind, s.Path, s.Content}
	for _, e := range c.byID[k] {
		if sameSpec(&e.spec, s) {
			return e, nil
		}
	}
	// The encoder puts a blank line before every table but its first.
	header := []byte("[[resource]]\n")
	i := bytes.Index(base.toml, header)
	if i < 0 {
		return nil, fmt.Errorf("resource %s: its TOML has no [[resource]] header", base.id)
	}
	i += len(header)
	e := &entry{spec: *s, id: base.id, cost: base.cost}
	t := make([]byte, 0, len(base.toml)+len(s.Content)+len(s.Content)/8+16)
	t = append(t, base.toml[:i]...)
	t = append(t, "  content = "...)
	t = tomlfile.AppendString(t, s.Content)
	t = append(t, '\n')
	e.toml = append(t, base.toml[i:]...)
	e.digest = specDigest(&c.buf, c.json, s)
	e.line = []byte(e.id + " " + e.digest + "\n")
	c.byID[k] = append(c.byID[k], e)
	return e, nil
}

// sameSpec reports whether two specs are equal in every field.
// TestSameSpecCoversSpec keeps it in step with resource.Spec.
func sameSpec(a, b *resource.Spec) bool {
	return a.Kind == b.Kind && a.Path == b.Path && a.Name == b.Name && a.State == b.State &&
		a.Content == b.Content && a.Secret == b.Secret && a.Mode == b.Mode && a.SpecialBits == b.SpecialBits &&
		a.Owner == b.Owner && a.Group == b.Group && a.ReplaceSymlink == b.ReplaceSymlink &&
		a.Target == b.Target && a.Version == b.Version &&
		sameBool(a.Enabled, b.Enabled) && sameBool(a.Running, b.Running) &&
		slices.Equal(a.RestartOn, b.RestartOn) && a.Order == b.Order &&
		a.Encoding == b.Encoding && slices.Equal(a.Validate, b.Validate) && a.ValidateShell == b.ValidateShell &&
		a.Purge == b.Purge && sameInt(a.UID, b.UID) && sameInt(a.GID, b.GID) &&
		slices.Equal(a.Groups, b.Groups) && a.Home == b.Home && a.Shell == b.Shell && a.System == b.System
}

func sameInt(a, b *int) bool {
	return a == b || a != nil && b != nil && *a == *b
}

func sameBool(a, b *bool) bool {
	return a == b || a != nil && b != nil && *a == *b
}

// resourceTable is how a node's declaration holds its resources; an
// entry's TOML is one element of it.
type resourceTable struct {
	Resources []resource.Spec `toml:"resource"`
}

// SpecDigest is the digest of a resource's declared settings. Content is
// included, so a secret's digest changes with it, but the content itself
// is never shown.
func SpecDigest(s resource.Spec) string {
	var buf bytes.Buffer
	return specDigest(&buf, json.NewEncoder(&buf), &s)
}

// specDigest is SpecDigest with a buffer and an encoder writing to it.
func specDigest(buf *bytes.Buffer, enc *json.Encoder, s *resource.Spec) string {
	buf.Reset()
	// Encoding a struct of strings, bools and ints cannot fail.
	enc.Encode(s)
	sum := sha256.Sum256(buf.Bytes())
	return "sha256:" + hex.EncodeToString(sum[:])
}

// compare diffs the plan against the newest committed generation (prev
// is nil when there is none) and decides whether anything changed. kept
// holds the manifests of the generations prev held nodes on
// (keptManifests): a node prev held is compared with what it kept.
func (p *plan) compare(prevGen uint64, prev *generation.Manifest, kept map[uint64]*generation.Manifest) (*Result, error) {
	res := &Result{Previous: prevGen, Nodes: make([]NodeChange, 0, len(p.nodes)),
		Ineligible: p.ineligible, Unmatched: p.unmatched, Unsealable: p.unsealable, Warnings: p.warnings, Wave: p.wave}
	p.sources = map[string]changeSource{}
	var old *oldManifest
	if prev != nil {
		var err error
		if old, err = readOld(prevGen, prev); err != nil {
			return nil, err
		}
		if err := old.indexHeld(kept); err != nil {
			return nil, err
		}
	}
	res.Held = p.heldOn(old)
	same := old != nil && len(old.m.Nodes) == len(p.nodes) &&
		slices.Equal(old.m.Ineligible, p.ineligibleNames()) && slices.Equal(old.m.Unassigned, p.unmatched) &&
		slices.Equal(old.heldNames(), p.heldNames())
	for i, np := range p.nodes {
		nc := NodeChange{Name: np.id.Name, NodeID: np.id.NodeID, Resources: len(np.entries)}
		var on *generation.ManifestNode
		from := old
		if old != nil {
			on = old.byName[np.id.Name]
			if on == nil {
				var err error
				if on, from, err = old.kept(np.id.Name); err != nil {
					return nil, err
				}
			}
		}
		switch {
		case on == nil:
			nc.Added = make([]string, len(np.entries))
			for j, e := range np.entries {
				nc.Added[j] = e.id
			}
		case on.Digest != np.digest:
			before, err := from.resources(on)
			if err != nil {
				return nil, err
			}
			nc.Added, nc.Changed, nc.Removed = diff(before, np.entries)
			if len(nc.Changed) > 0 {
				p.sources[np.id.Name] = changeSource{from: from, on: on}
			}
		}
		if on != nil && on.NodeID != np.id.NodeID {
			nc.PreviousNodeID = on.NodeID
		}
		if same {
			o := old.m.Nodes[i]
			same = o.Name == np.id.Name && o.NodeID == np.id.NodeID && o.Digest == np.digest
		}
		res.Nodes = append(res.Nodes, nc)
	}
	res.Unchanged = same
	return res, nil
}

// diff compares a node's resources before and now, both sorted by ID.
func diff(before []generation.ManifestResource, now []*entry) (added, changed, removed []string) {
	i, j := 0, 0
	for i < len(before) || j < len(now) {
		switch {
		case j == len(now) || i < len(before) && before[i].ID < now[j].id:
			removed = append(removed, before[i].ID)
			i++
		case i == len(before) || now[j].id < before[i].ID:
			added = append(added, now[j].id)
			j++
		default:
			if before[i].Digest != now[j].digest {
				changed = append(changed, now[j].id)
			}
			i++
			j++
		}
	}
	return added, changed, removed
}

func names(in []Ineligible) []string {
	out := make([]string, len(in))
	for i, x := range in {
		out[i] = x.Name
	}
	return out
}
