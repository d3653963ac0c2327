package fleet

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/declaration"
	"github.com/muster-tool/muster/internal/enrol"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/internal/hugepage"
	"github.com/muster-tool/muster/internal/outcome"
	"github.com/muster-tool/muster/spool"
)

// Status is where a node stands on one generation. Every node is exactly
// one of them. The precedence, from the manifest declare wrote for the
// generation:
//
//   - assigned by the manifest: Applied, Failed or Outstanding, judged by
//     the newest counted report of that generation from the node's current
//     identity, even if the node has become ineligible since;
//   - listed as held by the manifest (a staged rollout declared the
//     generation for a wave that leaves the node out): Held, on the
//     generation it keeps;
//   - listed as ineligible by the manifest: Ineligible;
//   - listed as unassigned by the manifest: Unassigned;
//   - not in the manifest at all (enrolled since): Ineligible if its
//     newest briefing has a failed line, Unassigned otherwise.
//
// A node whose current identity is revoked is Decommissioned whatever the
// manifest says. Outstanding has no time limit: a node that has been off
// for weeks is outstanding, never failed, stale or dead.
type Status string

const (
	Applied        Status = "applied"
	Failed         Status = "failed"
	Outstanding    Status = "outstanding"
	Ineligible     Status = "ineligible"
	Unassigned     Status = "unassigned"
	Held           Status = "held"
	Decommissioned Status = "decommissioned"
)

// statusOrder is the order of --sort status: what needs attention first.
var statusOrder = map[Status]int{Failed: 0, Outstanding: 1, Ineligible: 2, Unassigned: 3, Held: 4, Applied: 5, Decommissioned: 6}

// NodeStatus is one node on one generation.
type NodeStatus struct {
	Name   string
	NodeID string // the current identity (for a decommissioned node, the revoked one)
	Status Status
	// Report is the newest counted report of the generation (applied,
	// failed), nil otherwise.
	Report *ReportInfo
	// FailedLines are the reasons: the failed lines of the report
	// (failed) or of the newest briefing (ineligible).
	FailedLines []outcome.Line
	// LastApplied is the newest generation the node applied (its newest
	// report of it passed), 0 if none.
	LastApplied uint64
	// HeldOn is the generation a held node keeps, 0 if it had none.
	HeldOn uint64
	// LastContact is the time of the node's newest counted report or
	// briefing, zero if it never sent either. It is shown as it is:
	// there is no threshold.
	LastContact time.Time
	// Note explains what the status alone does not.
	Note string
}

// ReportInfo describes one report.
type ReportInfo struct {
	Object     string
	Seq        uint64
	Start, End time.Time
	Muster     string
	Notes      []string
}

// Object is a report that was refused or flagged, and why.
type Object struct {
	Name       string
	Node       string // the node name, when the identity is known
	NodeID     string
	Generation uint64
	Kind       string
	Reason     string
	// Told is set for a report refused because its identity is revoked
	// that an earlier run already said was refused (see State.Tell).
	Told bool
}

// Kinds of refused and flagged reports.
const (
	// Refused: not counted and not trusted.
	RefusedRevoked    = "revoked"    // from an identity that is revoked now
	RefusedUnknown    = "unknown"    // filed under a node id no identity has
	RefusedUnverified = "unverified" // failed verification or decoding
	// Flagged: validly signed but claiming what cannot be, so not counted.
	FlaggedNewer    = "newer"    // a generation newer than the newest committed
	FlaggedMisfiled = "misfiled" // names another node, node id or generation than it is filed under
	FlaggedFork     = "fork"     // applied another commit of its generation than the spool holds
)

// Totals count the nodes of a view by status.
type Totals struct {
	Nodes, Applied, Failed, Outstanding, Ineligible, Unassigned, Held, Decommissioned int
}

func (t *Totals) add(s Status) {
	t.Nodes++
	switch s {
	case Applied:
		t.Applied++
	case Failed:
		t.Failed++
	case Outstanding:
		t.Outstanding++
	case Ineligible:
		t.Ineligible++
	case Unassigned:
		t.Unassigned++
	case Held:
		t.Held++
	case Decommissioned:
		t.Decommissioned++
	}
}

// Selection chooses the nodes of a view.
type Selection struct {
	// Names limits the view to these nodes; empty means every node.
	Names []string
	// Patterns limits the view to the nodes whose name matches one of
	// these shell patterns, as a role's nodes do, besides those in
	// Names. A node they match is left out when decommissioned, unless
	// All is set.
	Patterns []string
	// All includes decommissioned nodes (a node named in Names is always
	// included).
	All bool
}

// View is where every selected node stands on one generation.
type View struct {
	Generation uint64
	Run        string
	DeclaredAt time.Time
	// Commit is the digest of the generation's commit; ExpiresAt its
	// expiry, zero if it has none.
	Commit    string
	ExpiresAt time.Time
	// Forks are the places where the spool holds two histories of the
	// mesh (State.Forks).
	Forks  []generation.Fork
	Newest uint64 // the newest committed generation
	// Manifest is false when the generation's manifest could not be read:
	// every eligible node is then taken as assigned.
	Manifest bool
	// Wave is the part of the fleet a staged rollout declared the
	// generation for, empty for all of it.
	Wave   string
	Nodes  []NodeStatus // by name
	Totals Totals
	// Refused and Flagged are the reports not counted, of the selected
	// nodes (of every node id when no names are selected).
	Refused []Object
	Flagged []Object
}

// RefusedCounts counts refused reports by kind.
func (v *View) RefusedCounts() map[string]int {
	c := map[string]int{RefusedRevoked: 0, RefusedUnknown: 0, RefusedUnverified: 0}
	for _, o := range v.Refused {
		c[o.Kind]++
	}
	return c
}

// manifestView is a manifest as report uses it.
type manifestView struct {
	assigned   map[string]string // name → node id
	ineligible map[string]bool
	unassigned map[string]bool
	held       map[string]uint64 // name → the generation it keeps
	wave       string
}

// Generation returns where the selected nodes stand on generation gen (0
// means the newest committed).
func (s *State) Generation(ctx context.Context, gen uint64, sel Selection) (*View, error) {
	if gen == 0 {
		gen = s.Newest()
		if gen == 0 {
			return nil, fault.WithHint(generation.ErrNoGeneration, "declare one with: muster declare")
		}
	}
	c, ok := s.cache.Commits[gen]
	if !ok {
		return nil, fault.WithHint(fmt.Errorf("generation %d is not committed (the newest is %d)", gen, s.Newest()),
			"see the committed generations with: muster report --history")
	}
	want, err := s.selection(sel)
	if err != nil {
		return nil, err
	}
	man, err := s.manifest(ctx, gen)
	if err != nil {
		return nil, err
	}
	s.save()
	v := &View{Generation: gen, Run: c.Run, DeclaredAt: c.DeclaredAt, Commit: c.Digest, ExpiresAt: c.ExpiresAt, Forks: s.Forks,
		Newest: s.Newest(), Manifest: man != nil}
	if man != nil {
		v.Wave = man.wave
	}
	// The refused and flagged reports are found while the nodes are
	// classified: both only read the state.
	objects := make(chan struct{})
	go func() {
		defer close(objects)
		v.Refused, v.Flagged = s.objects(sel)
	}()
	v.Nodes = s.classifyAll(gen, c, man, s.reg.Names(), want)
	for i := range v.Nodes {
		v.Totals.add(v.Nodes[i].Status)
	}
	<-objects
	return v, nil
}

// classifyAll classifies the nodes named that want selects, in the order
// of names, a part of them on each usable CPU: at 100,000 nodes this is
// most of a view, and classify only reads the state.
func (s *State) classifyAll(gen uint64, c commitFact, man *manifestView, names []string, want func(*enrol.Node) bool) []NodeStatus {
	// Room for every node at once, each part writing from where its
	// names start: a NodeStatus is large, and growing the slice 100,000
	// times over copies each many times. At that size it is 13 MB,
	// which huge pages back (see hugepage).
	out := hugepage.Slice[NodeStatus](len(names))
	parts := min(runtime.GOMAXPROCS(0), len(names))
	kept := make([]int, parts)
	var wg sync.WaitGroup
	for p := range parts {
		lo, hi := p*len(names)/parts, (p+1)*len(names)/parts
		wg.Go(func() {
			k := lo
			for _, name := range names[lo:hi] {
				if n := s.reg.Nodes[name]; want(n) {
					out[k] = s.classify(gen, c, man, n)
					k++
				}
			}
			kept[p] = k - lo
		})
	}
	wg.Wait()
	// Each part's nodes moved up behind the part before's.
	n := 0
	for p := range parts {
		lo := p * len(names) / parts
		n += copy(out[n:], out[lo:lo+kept[p]])
	}
	clear(out[n:])
	return out[:n]
}

// HistoryEntry is one generation's totals as of now.
type HistoryEntry struct {
	Generation uint64
	Run        string
	DeclaredAt time.Time
	Manifest   bool
	Wave       string // see View.Wave
	Totals     Totals
}

// History returns every committed generation, newest first, with where
// the selected nodes stand on it now.
func (s *State) History(ctx context.Context, sel Selection) ([]HistoryEntry, error) {
	want, err := s.selection(sel)
	if err != nil {
		return nil, err
	}
	var out []HistoryEntry
	for i := len(s.gens) - 1; i >= 0; i-- {
		gen := s.gens[i]
		c := s.cache.Commits[gen]
		man, err := s.manifest(ctx, gen)
		if err != nil {
			return nil, err
		}
		h := HistoryEntry{Generation: gen, Run: c.Run, DeclaredAt: c.DeclaredAt, Manifest: man != nil}
		if man != nil {
			h.Wave = man.wave
		}
		for _, name := range s.reg.Names() {
			n := s.reg.Nodes[name]
			if want(n) {
				h.Totals.add(s.classify(gen, c, man, n).Status)
			}
		}
		out = append(out, h)
	}
	s.save()
	return out, nil
}

// selection returns which registry nodes sel includes.
func (s *State) selection(sel Selection) (func(*enrol.Node) bool, error) {
	if !sel.limited() {
		return func(n *enrol.Node) bool { return sel.All || !decommissioned(n) }, nil
	}
	for _, name := range sel.Names {
		if s.reg.Nodes[name] == nil {
			return nil, fault.WithHint(fmt.Errorf("node %s is not enrolled", name), "see the enrolled nodes with: muster enrol list")
		}
	}
	named := sel.named()
	want := func(n *enrol.Node) bool {
		return named[n.Name] || sel.matches(n.Name) && (sel.All || !decommissioned(n))
	}
	if len(sel.Patterns) > 0 && !slices.ContainsFunc(s.reg.Names(), func(name string) bool { return want(s.reg.Nodes[name]) }) {
		return nil, fault.WithHint(fmt.Errorf("no enrolled node matches %s", strings.Join(sel.Patterns, " or ")), "see the enrolled nodes with: muster enrol list")
	}
	return want, nil
}

// limited reports whether sel names nodes or patterns.
func (sel Selection) limited() bool { return len(sel.Names)+len(sel.Patterns) > 0 }

func (sel Selection) named() map[string]bool {
	named := make(map[string]bool, len(sel.Names))
	for _, n := range sel.Names {
		named[n] = true
	}
	return named
}

// matches reports whether name matches one of sel's patterns.
func (sel Selection) matches(name string) bool {
	for _, p := range sel.Patterns {
		if declaration.MatchName(p, name) {
			return true
		}
	}
	return false
}

func decommissioned(n *enrol.Node) bool { return n.Current == nil || n.Current.Revoked() }

// manifest returns generation gen's manifest, nil with a warning if it
// cannot be read.
func (s *State) manifest(ctx context.Context, gen uint64) (*manifestView, error) {
	c := s.cache.Commits[gen]
	mf, ok := s.cache.Manifests[gen]
	if !ok || mf.Run != c.Run {
		name := spool.ManifestName(gen, c.Run)
		data, err := s.mesh.Spool.Get(ctx, name, 0)
		if err != nil {
			if fatal(ctx, err) || !errors.Is(err, spool.ErrNotFound) && !errors.Is(err, spool.ErrTooLarge) {
				return nil, err
			}
			s.warnf("generation %d: its manifest %s cannot be read (%v): every eligible node is taken as assigned", gen, name, err)
			return nil, nil
		}
		var man generation.Manifest
		signer := s.mesh.Pair.Sign.Public().(ed25519.PublicKey)
		err = bundle.OpenTOML(data, generation.ManifestCtx(gen, c.Run), s.mesh.Pair.Age, signer, &man)
		if err == nil && (man.Generation != gen || man.Run != c.Run) {
			err = fmt.Errorf("it names generation %d of run %s", man.Generation, man.Run)
		}
		if err != nil {
			s.warnf("generation %d: manifest %s refused: %v: every eligible node is taken as assigned", gen, name, err)
			return nil, nil
		}
		mf = manifestFact{Run: c.Run}
		for _, n := range man.Nodes {
			mf.Names = append(mf.Names, s.cache.intern(s.strIdx, n.Name))
			mf.IDs = append(mf.IDs, s.cache.intern(s.strIdx, n.NodeID))
		}
		for _, n := range man.Ineligible {
			mf.Ineligible = append(mf.Ineligible, s.cache.intern(s.strIdx, n))
		}
		for _, n := range man.Unassigned {
			mf.Unassigned = append(mf.Unassigned, s.cache.intern(s.strIdx, n))
		}
		for _, h := range man.Held {
			mf.Held = append(mf.Held, s.cache.intern(s.strIdx, h.Name))
			mf.HeldOn = append(mf.HeldOn, h.Generation)
		}
		mf.Wave = man.Wave
		s.shareNodeList(gen, &mf)
		s.cache.Manifests[gen] = mf
		s.Stats.ManifestsRead++
		s.dirty = true
	}
	str := s.cache.Strings
	mv := &manifestView{
		assigned:   make(map[string]string, len(mf.Names)),
		ineligible: make(map[string]bool, len(mf.Ineligible)),
		unassigned: make(map[string]bool, len(mf.Unassigned)),
		held:       make(map[string]uint64, len(mf.Held)),
		wave:       mf.Wave,
	}
	for i, n := range mf.Names {
		mv.assigned[str[n]] = str[mf.IDs[i]]
	}
	for _, n := range mf.Ineligible {
		mv.ineligible[str[n]] = true
	}
	for _, n := range mf.Unassigned {
		mv.unassigned[str[n]] = true
	}
	for i, n := range mf.Held {
		mv.held[str[n]] = mf.HeldOn[i]
	}
	return mv, nil
}

// shareNodeList makes mf, generation gen's manifest, hold the node list of
// the nearest older or newer generation whose manifest the cache holds,
// when the two are the same: a fleet declared to the same nodes keeps one
// list, not one a generation (see sharedVersion).
func (s *State) shareNodeList(gen uint64, mf *manifestFact) {
	at, _ := slices.BinarySearch(s.gens, gen)
	for _, step := range []int{-1, 1} {
		for i := at + step; i >= 0 && i < len(s.gens); i += step {
			near, ok := s.cache.Manifests[s.gens[i]]
			if !ok || s.gens[i] == gen {
				continue
			}
			if slices.Equal(near.Names, mf.Names) && slices.Equal(near.IDs, mf.IDs) {
				mf.Names, mf.IDs = near.Names, near.IDs
				return
			}
			break
		}
	}
}

// classify decides where node n stands on generation gen (see Status).
func (s *State) classify(gen uint64, c commitFact, man *manifestView, n *enrol.Node) NodeStatus {
	ns := NodeStatus{Name: n.Name}
	cur := n.Current
	if decommissioned(n) {
		ns.Status = Decommissioned
		if cur != nil {
			ns.NodeID = cur.NodeID
			ns.Note = fmt.Sprintf("identity %s was revoked at %s: %s", cur.NodeID, cur.RevokedAt.UTC().Format(time.RFC3339), cur.RevokeReason)
		}
		return ns
	}
	ns.NodeID = cur.NodeID
	var reports []reportFact
	var brief *briefFact
	if nf := s.cache.Nodes[cur.NodeID]; nf != nil {
		reports, brief = nf.Reports, nf.Brief
	}
	b := s.Newest()
	ns.LastApplied = lastApplied(reports, b, s.cache.Commits)
	ns.LastContact = lastContact(reports, brief, b)
	briefFails := brief != nil && len(brief.Failed) > 0
	ineligible := func(why string) NodeStatus {
		ns.Status = Ineligible
		switch {
		case briefFails:
			ns.FailedLines = brief.Failed
		case brief == nil:
			ns.Note = why + "; no briefing from it has been read"
		default:
			ns.Note = why + "; its newest briefing passes now, so the next declare can assign it"
		}
		return ns
	}
	switch {
	case man == nil:
		if briefFails {
			return ineligible("")
		}
	case man.assigned[n.Name] != "":
		if was := man.assigned[n.Name]; was != cur.NodeID {
			ns.Note = fmt.Sprintf("generation %d was assigned to identity %s, which %s has replaced", gen, was, cur.NodeID)
		}
	case man.isHeld(n.Name):
		ns.Status = Held
		ns.HeldOn = man.held[n.Name]
		ns.Note = heldNote(gen, man.wave, ns.HeldOn)
		return ns
	case man.ineligible[n.Name]:
		return ineligible(fmt.Sprintf("ineligible when generation %d was declared", gen))
	case man.unassigned[n.Name]:
		ns.Status = Unassigned
		ns.Note = fmt.Sprintf("no role of generation %d selects it", gen)
		return ns
	default:
		if briefFails {
			return ineligible("")
		}
		ns.Status = Unassigned
		if cur.AdmittedAt.After(c.DeclaredAt) {
			ns.Note = fmt.Sprintf("enrolled after generation %d was declared", gen)
		} else {
			ns.Note = fmt.Sprintf("not in the manifest of generation %d", gen)
		}
		return ns
	}
	r := newestCounted(reports, gen, b, s.cache.Commits)
	if r == nil {
		ns.Status = Outstanding
		if f := newestForked(reports, gen, b, s.cache.Commits); f != nil {
			ns.Note = fmt.Sprintf("it applied commit %s of generation %d, another history's (the spool's is %s): it has not applied this one",
				generation.ShortDigest(f.Commit), gen, generation.ShortDigest(c.Digest))
		}
		return ns
	}
	ns.Report = &ReportInfo{Object: spool.ReportName(cur.NodeID, r.Gen, r.Seq), Seq: r.Seq, Start: fromUnixNano(r.Start), End: fromUnixNano(r.End), Muster: r.Muster, Notes: r.notes()}
	if r.Passed {
		ns.Status = Applied
	} else {
		ns.Status = Failed
		ns.FailedLines = r.failed()
	}
	return ns
}

func (m *manifestView) isHeld(name string) bool {
	_, ok := m.held[name]
	return ok
}

// heldNote says why a held node has nothing to do with generation gen.
func heldNote(gen uint64, wave string, on uint64) string {
	if on == 0 {
		return fmt.Sprintf("no generation to keep; generation %d is for wave %s only", gen, wave)
	}
	return fmt.Sprintf("keeps generation %d; generation %d is for wave %s only", on, gen, wave)
}

// forked reports whether f is a report of another commit of its
// generation than the spool holds: the node applied another history's
// generation, which is not this one's.
func forked(f *reportFact, commits map[uint64]commitFact) bool {
	if f.Commit == "" {
		return false // a host that did not say
	}
	c, ok := commits[f.Gen]
	return ok && c.Digest != "" && c.Digest != f.Commit
}

// newestCounted returns the newest usable report of generation gen that is
// of the spool's commit of it.
func newestCounted(fs []reportFact, gen, b uint64, commits map[uint64]commitFact) *reportFact {
	i := sort.Search(len(fs), func(i int) bool { return fs[i].Gen > gen })
	for i--; i >= 0 && fs[i].Gen == gen; i-- {
		if usable(&fs[i], b) && !forked(&fs[i], commits) {
			return &fs[i]
		}
	}
	return nil
}

// newestForked returns the newest usable report of generation gen that is
// of another commit of it than the spool's.
func newestForked(fs []reportFact, gen, b uint64, commits map[uint64]commitFact) *reportFact {
	i := sort.Search(len(fs), func(i int) bool { return fs[i].Gen > gen })
	for i--; i >= 0 && fs[i].Gen == gen; i-- {
		if usable(&fs[i], b) && forked(&fs[i], commits) {
			return &fs[i]
		}
	}
	return nil
}

// lastApplied is the newest generation whose newest usable report passed.
func lastApplied(fs []reportFact, b uint64, commits map[uint64]commitFact) uint64 {
	var decided uint64 // the generation whose newest report was seen
	for i := len(fs) - 1; i >= 0; i-- {
		f := &fs[i]
		if !usable(f, b) || forked(f, commits) || f.Gen == decided {
			continue
		}
		decided = f.Gen
		if f.Passed {
			return f.Gen
		}
	}
	return 0
}

// ended is when the report's run ended, or began if it did not say.
func (f *reportFact) ended() int64 {
	if f.End == 0 {
		return f.Start
	}
	return f.End
}

// lastContact is the time of the newest usable report or briefing.
func lastContact(fs []reportFact, brief *briefFact, b uint64) time.Time {
	var t int64
	for i := range fs {
		f := &fs[i]
		if !usable(f, b) {
			continue
		}
		t = max(t, f.ended())
	}
	if brief != nil {
		t = max(t, brief.Time)
	}
	return fromUnixNano(t)
}

// objects lists the refused and flagged reports of the selected nodes.
func (s *State) objects(sel Selection) (refused, flagged []Object) {
	named := sel.named()
	newest := s.Newest()
	for nodeID, nf := range s.cache.Nodes {
		id := s.reg.Identities[nodeID]
		if id == nil || sel.limited() && !named[id.Name] && !sel.matches(id.Name) {
			continue
		}
		for i := range nf.Reports {
			f := &nf.Reports[i]
			if f.err() == "" && !id.Revoked() && f.misfiled() == "" && f.Gen <= newest && !forked(f, s.cache.Commits) {
				continue // counted, nothing to say
			}
			o := Object{Name: spool.ReportName(nodeID, f.Gen, f.Seq), Node: id.Name, NodeID: nodeID, Generation: f.Gen}
			switch {
			case f.err() != "":
				o.Kind, o.Reason = RefusedUnverified, f.err()
				refused = append(refused, o)
			case id.Revoked():
				o.Kind, o.Told = RefusedRevoked, f.Told
				o.Reason = fmt.Sprintf("identity %s of %s was revoked at %s: %s", nodeID, id.Name, id.RevokedAt.UTC().Format(time.RFC3339), id.RevokeReason)
				refused = append(refused, o)
			case f.misfiled() != "":
				o.Kind, o.Reason = FlaggedMisfiled, f.misfiled()
				flagged = append(flagged, o)
			case f.Gen <= newest:
				o.Kind = FlaggedFork
				o.Reason = fmt.Sprintf("it applied commit %s of generation %d, but the spool's commit of generation %d is %s: another history of this mesh",
					generation.ShortDigest(f.Commit), f.Gen, f.Gen, generation.ShortDigest(s.cache.Commits[f.Gen].Digest))
				flagged = append(flagged, o)
			default: // f.Gen > newest
				o.Kind = FlaggedNewer
				if newest == 0 {
					o.Reason = fmt.Sprintf("it claims generation %d, but no generation is committed", f.Gen)
				} else {
					o.Reason = fmt.Sprintf("it claims generation %d, newer than the newest committed generation %d", f.Gen, newest)
				}
				flagged = append(flagged, o)
			}
		}
	}
	if !sel.limited() {
		refused = append(refused, s.unknown...)
	}
	byName := func(os []Object) {
		sort.Slice(os, func(i, j int) bool { return os[i].Name < os[j].Name })
	}
	byName(refused)
	byName(flagged)
	return refused, flagged
}

// Tell records that report said the refused reports in objs from revoked
// identities were refused, so that it says so once per report, not on
// every run: a later view marks them Told. A revoked identity's reports
// stay refused for good, so there is nothing new to say of them until
// spool gc removes them. The cache is written back; it returns what did
// not stop it (a cache that cannot be written: the next run says so
// again).
func (s *State) Tell(objs []Object) []string {
	for _, o := range objs {
		if o.Kind != RefusedRevoked || o.Told {
			continue
		}
		nodeID, gen, seq, err := spool.ParseReportName(o.Name)
		nf := s.cache.Nodes[nodeID]
		if err != nil || nf == nil {
			continue
		}
		i, ok := slices.BinarySearchFunc(nf.Reports, [2]uint64{gen, seq}, func(f reportFact, k [2]uint64) int {
			return cmp.Or(cmp.Compare(f.Gen, k[0]), cmp.Compare(f.Seq, k[1]))
		})
		if ok && !nf.Reports[i].Told {
			nf.Reports[i].Told = true
			s.dirty = true
		}
	}
	before := len(s.Warnings)
	s.save()
	return s.Warnings[before:]
}

// SortNodes orders nodes by "name", "status" (what needs attention
// first: failed, outstanding, ineligible, unassigned, applied,
// decommissioned) or "contact" (longest without contact first, never
// first of all), then by name.
func SortNodes(nodes []NodeStatus, by string) error {
	var less func(a, b *NodeStatus) int
	switch by {
	case "", "name":
		less = func(a, b *NodeStatus) int { return 0 }
	case "status":
		less = func(a, b *NodeStatus) int { return statusOrder[a.Status] - statusOrder[b.Status] }
	case "contact":
		less = func(a, b *NodeStatus) int { return a.LastContact.Compare(b.LastContact) }
	default:
		return fault.Usagef("--sort %q: want name, status or contact", by)
	}
	sort.SliceStable(nodes, func(i, j int) bool {
		if c := less(&nodes[i], &nodes[j]); c != 0 {
			return c < 0
		}
		return strings.Compare(nodes[i].Name, nodes[j].Name) < 0
	})
	return nil
}
