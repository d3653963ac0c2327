// Package declare owns deploy as one write: it resolves a validated
// declaration for every enrolled, eligible node, seals one bundle per node
// to that node alone, records a manifest for the mesh, and commits the new
// generation with a single create-if-absent write. Nodes act only on
// committed generations, so bundles without their commit are never applied.
// It also decides what an unchanged declaration is (the same manifest as
// the newest committed generation) and what changed for each node since,
// and keeps a mesh on one history (history.go: it never commits on a spool
// behind or beside the newest generation the mesh committed).
//
// internal/declaration is the language it reads; internal/generation owns
// the documents it writes.
package declare

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/muster-tool/muster/internal/brief"
	"github.com/muster-tool/muster/internal/declaration"
	"github.com/muster-tool/muster/internal/enrol"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/internal/ledger"
	"github.com/muster-tool/muster/internal/mesh"
	"github.com/muster-tool/muster/internal/outcome"
)

// Recovery is the newest recovery copy the mesh holds for a node.
type Recovery struct {
	NodeID string
	Ledger []ledger.Entry
}

// Options steer one declare.
type Options struct {
	// DryRun computes what would change and writes nothing.
	DryRun bool
	Now    time.Time
	// Recovery returns the newest recovery copy for a node name, if any.
	Recovery func(name string) (Recovery, bool)
	// Retries is how many times in all a commit is tried when other
	// declares keep committing the generation first (default 3).
	Retries int
	// ValidFor, if positive, signs an expiry into the commit: hosts past
	// it report the generation expired (see generation.Commit.ExpiresAt).
	ValidFor time.Duration
	// Wave, if not nil, declares the generation for the nodes it selects
	// only; the others are held (see rollout.go).
	Wave *declaration.Wave
}

// NodeChange is what one node gets, compared with the newest committed
// generation.
type NodeChange struct {
	Name      string `json:"name"`
	NodeID    string `json:"node_id"`
	Resources int    `json:"resources"`
	// PreviousNodeID is set when the node had another identity in the
	// previous generation (it was re-enrolled).
	PreviousNodeID string   `json:"previous_node_id"`
	Added          []string `json:"added"`
	Changed        []string `json:"changed"`
	Removed        []string `json:"removed"`
	// Changes says, in a dry run, how each changed resource changes, in
	// the order of Changed.
	Changes []ResourceChange `json:"changes"`
}

// Same reports whether the node gets exactly what it had.
func (n NodeChange) Same() bool {
	return n.PreviousNodeID == "" && len(n.Added)+len(n.Changed)+len(n.Removed) == 0
}

// Ineligible is a node that gets nothing new, with the briefing lines that
// failed.
type Ineligible struct {
	Name   string         `json:"name"`
	Failed []outcome.Line `json:"failed_lines"`
}

// Unsealable is a node that gets nothing new because its bundle cannot be
// sealed, with the reason: its age key is of low order (an identity an
// older muster admitted), or sealing failed otherwise.
type Unsealable struct {
	Name   string `json:"name"`
	NodeID string `json:"node_id"`
	Reason string `json:"reason"`
}

// Result says what declare did (or, with DryRun, would do).
type Result struct {
	// Generation is the generation committed, the one that would be
	// (DryRun), or the one that stands (Unchanged).
	Generation uint64 `json:"generation"`
	// Run names the declare run whose bundles make up Generation; empty
	// for a dry run.
	Run      string `json:"run"`
	Previous uint64 `json:"previous"`
	// Commit is the digest of the commit written (or that stands).
	Commit string `json:"commit"`
	// ExpiresAt is when the generation expires, if it does.
	ExpiresAt  *time.Time   `json:"expires_at"`
	Unchanged  bool         `json:"unchanged"`
	DryRun     bool         `json:"dry_run"`
	Nodes      []NodeChange `json:"nodes"`
	Ineligible []Ineligible `json:"ineligible"`
	Unmatched  []string     `json:"unmatched"`
	// Unsealable nodes are listed as ineligible in the manifest.
	Unsealable []Unsealable `json:"unsealable"`
	// Wave is the part of the fleet the generation is declared for
	// (Options.Wave), empty for all of it; Held are the nodes the
	// declaration selects that it leaves out, by name.
	Wave     string   `json:"wave"`
	Held     []Held   `json:"held"`
	Warnings []string `json:"warnings"`
}

// ProblemsError is a declaration refused before anything was written: it
// carries every problem resolution found, warnings included.
type ProblemsError struct{ Problems []declaration.Problem }

func (e *ProblemsError) Error() string {
	var errs []declaration.Problem
	for _, p := range e.Problems {
		if !p.Warning {
			errs = append(errs, p)
		}
	}
	if len(errs) == 1 {
		return "declaration refused: " + errs[0].String()
	}
	return fmt.Sprintf("declaration refused: %d problems", len(errs))
}

// Declare resolves decl for the registry's trusted nodes and commits it as
// the next generation; briefs holds each identity's newest briefing by
// node id. An unchanged declaration writes nothing. If another declare
// commits the generation first, Declare compares and writes again as the
// generation after it.
func Declare(ctx context.Context, m *mesh.Mesh, reg *enrol.Registry, briefs map[string]*brief.Briefing, decl *declaration.Declaration, o Options) (*Result, error) {
	if o.Retries <= 0 {
		o.Retries = 3
	}
	p, err := newPlan(ctx, reg, briefs, decl)
	if err != nil {
		return nil, err
	}
	if err := p.hold(o.Wave); err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		hist, prev, warnings, err := currentHistory(ctx, m)
		if err != nil {
			return nil, err
		}
		var prevGen uint64
		var prevMan *generation.Manifest
		if prev != nil {
			prevGen = prev.Generation
			if prevMan, err = ManifestOf(ctx, m, prev.Generation, prev.Run); err != nil {
				return nil, err
			}
		}
		kept, err := keptManifests(ctx, m, prevMan)
		if err != nil {
			return nil, err
		}
		if err := p.vetNew(ctx, prevMan); err != nil {
			return nil, err
		}
		res, err := p.compare(prevGen, prevMan, kept)
		if err != nil {
			return nil, err
		}
		res.Warnings = append(res.Warnings, warnings...)
		res.DryRun = o.DryRun
		// A validity is renewed by every declare that gives one, and
		// dropped by one that does not: neither is unchanged.
		if res.Unchanged && o.ValidFor <= 0 && prev.ExpiresAt.IsZero() {
			res.Generation, res.Commit = prevGen, prev.Digest
			return res, nil
		}
		res.Unchanged = false
		res.Generation = hist.NextFree(prevGen)
		if o.ValidFor > 0 {
			t := o.Now.UTC().Add(o.ValidFor)
			res.ExpiresAt = &t
		}
		if o.DryRun {
			if err := p.explain(ctx, m, res, res.Generation); err != nil {
				return nil, err
			}
			return res, nil
		}
		c, err := p.write(ctx, m, res.Generation, prev, o)
		if err == nil {
			res.Run, res.Commit = c.Run, c.Digest
			res.dropUnsealable(p.unsealable)
			if err := m.RecordHead(mesh.Head{Generation: c.Generation, Commit: c.Digest, CommittedAt: c.DeclaredAt}); err != nil {
				res.Warnings = append(res.Warnings, fmt.Sprintf("generation %d is committed, but %s could not remember it: %v", c.Generation, mesh.HeadPath(m.Dir), err))
			}
			return res, nil
		}
		var lost *lostRace
		if !errors.As(err, &lost) {
			return nil, err
		}
		if attempt >= o.Retries {
			err := fmt.Errorf("another declare committed generation %d first, %d times in a row; nothing of this declare was committed", lost.gen, attempt)
			return nil, fault.WithHint(fault.New(fault.Temporary, err), "run declare again")
		}
	}
}

// dropUnsealable takes the nodes whose bundle could not be sealed out of
// r's nodes and lists them as unsealable.
func (r *Result) dropUnsealable(us []Unsealable) {
	r.Unsealable = us
	if len(us) == 0 {
		return
	}
	gone := make(map[string]bool, len(us))
	for _, u := range us {
		gone[u.NodeID] = true
	}
	r.Nodes = slices.DeleteFunc(r.Nodes, func(n NodeChange) bool { return gone[n.NodeID] })
}

// lostRace: another declare committed the generation first.
type lostRace struct{ gen uint64 }

func (e *lostRace) Error() string {
	return fmt.Sprintf("generation %d was committed by another declare", e.gen)
}

// newRunID names one attempt to write a generation. Two declares racing
// for one generation write under different runs, and the commit names the
// run that counts, so their bundles never mix.
func newRunID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
