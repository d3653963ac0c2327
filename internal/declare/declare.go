// Package declare owns deploy as one write: it resolves a validated
// declaration for every enrolled, eligible node, seals one bundle per node
// to that node alone, records a manifest for the mesh, and commits the new
// generation with a single create-if-absent write. Nodes act only on
// committed generations, so bundles without their commit are never applied.
package declare

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"time"

	"filippo.io/age"

	"github.com/muster-tool/muster/internal/brief"
	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/declaration"
	"github.com/muster-tool/muster/internal/enrol"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/internal/ledger"
	"github.com/muster-tool/muster/internal/mesh"
	"github.com/muster-tool/muster/internal/outcome"
	"github.com/muster-tool/muster/internal/resource"
	"github.com/muster-tool/muster/internal/workpool"
	"github.com/muster-tool/muster/spool"
)

// Recovery is the newest recovery copy the mesh holds for a node.
type Recovery struct {
	NodeID string
	Ledger []ledger.Entry
}

// Options steer one declare.
type Options struct {
	DryRun bool
	Now    time.Time
	// Recovery returns the newest recovery copy for a node name, if any.
	Recovery func(name string) (Recovery, bool)
	// Retries is how often a lost commit race is retried as the next
	// generation (default 3).
	Retries int
}

// NodeChange is what one node gets, compared with the previous generation.
type NodeChange struct {
	Name      string   `json:"name"`
	NodeID    string   `json:"node_id"`
	Resources int      `json:"resources"`
	Added     []string `json:"added,omitempty"`
	Changed   []string `json:"changed,omitempty"`
	Removed   []string `json:"removed,omitempty"`
}

// Ineligible is a node that gets nothing new, with the reason.
type Ineligible struct {
	Name   string         `json:"name"`
	Failed []outcome.Line `json:"failed_lines"`
}

// Result says what declare did (or, with DryRun, would do).
type Result struct {
	Generation uint64       `json:"generation"`
	Previous   uint64       `json:"previous"`
	Unchanged  bool         `json:"unchanged"`
	DryRun     bool         `json:"dry_run"`
	Nodes      []NodeChange `json:"nodes"`
	Ineligible []Ineligible `json:"ineligible"`
	Unassigned []string     `json:"unassigned"`
	Warnings   []string     `json:"warnings,omitempty"`
}

// Declare resolves decl for the registry's trusted nodes and commits it as
// the next generation.
func Declare(ctx context.Context, m *mesh.Mesh, reg *enrol.Registry, briefs map[string]*brief.Briefing, decl *declaration.Declaration, o Options) (*Result, error) {
	if o.Retries == 0 {
		o.Retries = 3
	}
	active := reg.Active()
	nodes := make([]declaration.Node, 0, len(active))
	byName := map[string]*enrol.Identity{}
	for _, id := range active {
		nodes = append(nodes, declaration.Node{Name: id.Name, Labels: id.Labels})
		byName[id.Name] = id
	}
	resolved, unmatched, problems := decl.Resolve(nodes)
	res := &Result{DryRun: o.DryRun, Nodes: []NodeChange{}, Ineligible: []Ineligible{}, Unassigned: []string{}}
	var errs []string
	for _, p := range problems {
		if p.Warning {
			res.Warnings = append(res.Warnings, p.String())
		} else {
			errs = append(errs, p.String())
		}
	}
	if len(errs) > 0 {
		return nil, &ProblemsError{Problems: errs}
	}
	unmatchedSet := map[string]bool{}
	for _, n := range unmatched {
		unmatchedSet[n] = true
	}
	// Split eligible from ineligible nodes.
	var assigned []declaration.Resolved
	for _, r := range resolved {
		id := byName[r.Node]
		b := briefs[id.NodeID]
		if b == nil || !b.Eligible() {
			in := Ineligible{Name: r.Node}
			if b == nil {
				in.Failed = []outcome.Line{{ID: "briefing", Status: outcome.Failed, Detail: "no briefing received"}}
			} else {
				in.Failed = outcome.FailedLines(b.Lines)
			}
			res.Ineligible = append(res.Ineligible, in)
			continue
		}
		if unmatchedSet[r.Node] {
			res.Unassigned = append(res.Unassigned, r.Node)
			continue
		}
		assigned = append(assigned, r)
	}
	// The previous generation, to diff against and to skip an unchanged
	// declaration.
	prev, prevMan, err := latestManifest(ctx, m)
	if err != nil {
		return nil, err
	}
	res.Previous = prev
	man := &generation.Manifest{Version: generation.FormatVersion, DeclaredAt: o.Now.UTC(), Ineligible: names(res.Ineligible), Unassigned: res.Unassigned}
	digestCache := map[*resource.Spec]string{}
	prevNodes := map[string]generation.ManifestNode{}
	if prevMan != nil {
		for _, n := range prevMan.Nodes {
			prevNodes[n.Name] = n
		}
	}
	for _, r := range assigned {
		id := byName[r.Node]
		mn := generation.ManifestNode{Name: r.Node, NodeID: id.NodeID, Resources: make(map[string]string, len(r.Resources))}
		h := sha256.New()
		fmt.Fprintf(h, "prune=%v\n", decl.Prune())
		for i := range r.Resources {
			s := &r.Resources[i]
			d, ok := digestCache[s]
			if !ok {
				d = SpecDigest(*s)
				digestCache[s] = d
			}
			mn.Resources[s.ID()] = d
			fmt.Fprintf(h, "%s %s\n", s.ID(), d)
		}
		mn.Digest = "sha256:" + hex.EncodeToString(h.Sum(nil))
		man.Nodes = append(man.Nodes, mn)
		nc := NodeChange{Name: r.Node, NodeID: id.NodeID, Resources: len(r.Resources)}
		old, had := prevNodes[r.Node]
		for rid, d := range mn.Resources {
			od, ok := old.Resources[rid]
			switch {
			case !had || !ok:
				nc.Added = append(nc.Added, rid)
			case od != d:
				nc.Changed = append(nc.Changed, rid)
			}
		}
		for rid := range old.Resources {
			if _, ok := mn.Resources[rid]; !ok {
				nc.Removed = append(nc.Removed, rid)
			}
		}
		if had && old.NodeID != id.NodeID && len(nc.Added)+len(nc.Changed)+len(nc.Removed) == 0 {
			nc.Changed = append(nc.Changed, "(re-enrolled identity)")
		}
		sort.Strings(nc.Added)
		sort.Strings(nc.Changed)
		sort.Strings(nc.Removed)
		res.Nodes = append(res.Nodes, nc)
	}
	if prevMan != nil && sameManifest(prevMan, man) {
		res.Unchanged = true
		res.Generation = prev
		return res, nil
	}
	if o.DryRun {
		res.Generation = prev + 1
		return res, nil
	}
	gen := prev + 1
	for attempt := 0; ; attempt++ {
		err := write(ctx, m, gen, assigned, byName, man, decl.Prune(), o)
		if err == nil {
			res.Generation = gen
			return res, nil
		}
		var lost *lostRace
		if !errors.As(err, &lost) {
			return nil, err
		}
		if attempt+1 >= o.Retries {
			return nil, fault.WithHint(fmt.Errorf("another declare committed generation %d at the same time, %d times in a row", lost.gen, o.Retries),
				"run declare again")
		}
		latest, err := generation.Committed(ctx, m.Spool)
		if err != nil {
			return nil, err
		}
		gen = latest[0] + 1
	}
}

// ProblemsError carries every validation problem.
type ProblemsError struct{ Problems []string }

func (e *ProblemsError) Error() string {
	if len(e.Problems) == 1 {
		return "declaration refused: " + e.Problems[0]
	}
	return fmt.Sprintf("declaration refused: %d problems", len(e.Problems))
}

type lostRace struct{ gen uint64 }

func (e *lostRace) Error() string {
	return fmt.Sprintf("generation %d was committed by another declare", e.gen)
}

// write seals every node's bundle, the manifest, and then the commit.
func write(ctx context.Context, m *mesh.Mesh, gen uint64, assigned []declaration.Resolved, byName map[string]*enrol.Identity, man *generation.Manifest, prune bool, o Options) error {
	run := newRunID()
	man.Generation, man.Run = gen, run
	now := o.Now.UTC()
	err := parallel(ctx, len(assigned), func(i int) error {
		r := assigned[i]
		id := byName[r.Node]
		rcpt, err := age.ParseX25519Recipient(id.Host.Age)
		if err != nil {
			return fmt.Errorf("node %s: %v", r.Node, err)
		}
		nd := generation.NodeDeclaration{
			Version: generation.FormatVersion, Generation: gen, Run: run, Node: r.Node, NodeID: id.NodeID,
			DeclaredAt: now, Prune: prune, Resources: r.Resources,
		}
		if o.Recovery != nil {
			if rc, ok := o.Recovery(r.Node); ok {
				nd.Recovery, nd.RecoveryFrom = rc.Ledger, rc.NodeID
			}
		}
		data, err := bundle.SealTOML(nd, generation.DeclCtx(gen, run, id.NodeID), m.Pair.Sign, rcpt)
		if err != nil {
			return fmt.Errorf("node %s: %w", r.Node, err)
		}
		return m.Spool.Put(ctx, spool.DeclName(gen, run, id.NodeID), data)
	})
	if err != nil {
		return fmt.Errorf("write declarations of generation %d: %w (nothing was committed)", gen, err)
	}
	data, err := bundle.SealTOML(man, generation.ManifestCtx(gen, run), m.Pair.Sign, m.Pair.Age.Recipient())
	if err != nil {
		return err
	}
	if err := m.Spool.Put(ctx, spool.ManifestName(gen, run), data); err != nil {
		return fmt.Errorf("write manifest of generation %d: %w (nothing was committed)", gen, err)
	}
	c := generation.Commit{Version: generation.FormatVersion, Generation: gen, Run: run, DeclaredAt: now}
	data, err = bundle.SignTOML(c, generation.CommitCtx(gen), m.Pair.Sign)
	if err != nil {
		return err
	}
	if err := m.Spool.Put(ctx, spool.CommitName(gen), data); err != nil {
		if errors.Is(err, spool.ErrConflict) {
			return &lostRace{gen: gen}
		}
		return fmt.Errorf("commit generation %d: %w", gen, err)
	}
	return nil
}

// latestManifest returns the newest committed generation and its manifest.
func latestManifest(ctx context.Context, m *mesh.Mesh) (uint64, *generation.Manifest, error) {
	gens, err := generation.Committed(ctx, m.Spool)
	if err != nil || len(gens) == 0 {
		return 0, nil, err
	}
	man, err := ReadManifest(ctx, m, gens[0])
	return gens[0], man, err
}

// ReadManifest reads the manifest of committed generation gen.
func ReadManifest(ctx context.Context, m *mesh.Mesh, gen uint64) (*generation.Manifest, error) {
	c, err := generation.ReadCommit(ctx, m.Spool, gen, m.Pair.Sign.Public().(ed25519.PublicKey))
	if err != nil {
		return nil, fault.New(fault.Refused, err)
	}
	data, err := m.Spool.Get(ctx, spool.ManifestName(gen, c.Run), 0)
	if err != nil {
		return nil, fmt.Errorf("manifest of generation %d: %w", gen, err)
	}
	var man generation.Manifest
	if err := bundle.OpenTOML(data, generation.ManifestCtx(gen, c.Run), m.Pair.Age, m.Pair.Sign.Public().(ed25519.PublicKey), &man); err != nil {
		return nil, fmt.Errorf("manifest of generation %d: %w", gen, err)
	}
	return &man, nil
}

func sameManifest(a, b *generation.Manifest) bool {
	if len(a.Nodes) != len(b.Nodes) || !equalStrings(a.Ineligible, b.Ineligible) || !equalStrings(a.Unassigned, b.Unassigned) {
		return false
	}
	for i := range a.Nodes {
		if a.Nodes[i].Name != b.Nodes[i].Name || a.Nodes[i].NodeID != b.Nodes[i].NodeID || a.Nodes[i].Digest != b.Nodes[i].Digest {
			return false
		}
	}
	return true
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func names(in []Ineligible) []string {
	out := make([]string, 0, len(in))
	for _, i := range in {
		out = append(out, i.Name)
	}
	return out
}

// SpecDigest is the digest of a resource's declared settings (content
// included, so a secret's digest changes with it, but the content itself is
// never shown).
func SpecDigest(s resource.Spec) string {
	var buf bytes.Buffer
	json.NewEncoder(&buf).Encode(s)
	sum := sha256.Sum256(buf.Bytes())
	return "sha256:" + hex.EncodeToString(sum[:])
}

func newRunID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func parallel(ctx context.Context, n int, fn func(i int) error) error {
	return workpool.Run(ctx, n, 8*runtime.GOMAXPROCS(0), fn)
}
