// Package generation owns the documents of a declared generation: the
// public commit that makes generation N exist (one create-if-absent write),
// the per-node declaration bundle sealed to that node, and the manifest,
// sealed to the mesh, that records what was assigned to whom so that the
// next declare can diff against it and report can tell assigned nodes from
// ineligible and unassigned ones.
package generation

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"

	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/ledger"
	"github.com/muster-tool/muster/internal/resource"
	"github.com/muster-tool/muster/spool"
)

// FormatVersion is the version of every document in this package.
const FormatVersion = 1

// Commit is generation N's commit: public, signed by the mesh. It names the
// declare run whose bundles make up the generation and holds no host names
// and no resource content.
type Commit struct {
	Version    int       `toml:"version"`
	Generation uint64    `toml:"generation"`
	Run        string    `toml:"run"`
	DeclaredAt time.Time `toml:"declared_at"`
}

// NodeDeclaration is what one node receives for one generation.
type NodeDeclaration struct {
	Version    int       `toml:"version"`
	Generation uint64    `toml:"generation"`
	Run        string    `toml:"run"`
	Node       string    `toml:"node"`
	NodeID     string    `toml:"node_id"`
	DeclaredAt time.Time `toml:"declared_at"`
	// Prune: remove packages muster installed that no declaration names
	// any more.
	Prune     bool            `toml:"prune,omitempty"`
	Resources []resource.Spec `toml:"resource"`
	// Recovery is the newest ledger the mesh holds for this node (from
	// this identity or the one it replaced), so a host without state can
	// still find its orphans.
	Recovery     []ledger.Entry `toml:"recovery,omitempty"`
	RecoveryFrom string         `toml:"recovery_from,omitempty"`
}

// Manifest records, for the mesh only, what a generation assigned.
type Manifest struct {
	Version    int            `toml:"version"`
	Generation uint64         `toml:"generation"`
	Run        string         `toml:"run"`
	DeclaredAt time.Time      `toml:"declared_at"`
	Nodes      []ManifestNode `toml:"node"`
	// Ineligible and Unassigned list node names that got nothing new.
	Ineligible []string `toml:"ineligible,omitempty"`
	Unassigned []string `toml:"unassigned,omitempty"`
	// Resources lists every distinct resource the generation assigned,
	// sorted by ID and then digest; nodes name theirs by position (see
	// ManifestNode.Set), so a fleet whose nodes share most of their
	// resources has a small manifest.
	Resources []ManifestResource `toml:"resource,omitempty"`
}

// ManifestResource is one resource as declared: its ID and the digest of
// its settings (never its content).
type ManifestResource struct {
	ID     string `toml:"id"`
	Digest string `toml:"digest"`
}

// ManifestNode is one assigned node: its identity, the digest of all it
// was assigned, and which resources those were.
type ManifestNode struct {
	Name   string `toml:"name"`
	NodeID string `toml:"node_id"`
	Digest string `toml:"digest"`
	// Set names the node's resources as ascending positions in
	// Manifest.Resources, written as comma-separated numbers and ranges,
	// such as "0-48,97,120-169".
	Set string `toml:"set,omitempty"`
	// Resources maps resource ID to digest: the manifest's first form,
	// which declare still reads when Set is empty but no longer writes.
	Resources map[string]string `toml:"resources,omitempty"`
}

// CommitCtx, DeclCtx and ManifestCtx bind the documents to their names.
func CommitCtx(gen uint64) bundle.Context {
	return bundle.Context{Kind: "commit", Name: spool.CommitName(gen)}
}

func DeclCtx(gen uint64, run, nodeID string) bundle.Context {
	return bundle.Context{Kind: "declaration", Node: nodeID, Name: spool.DeclName(gen, run, nodeID)}
}

func ManifestCtx(gen uint64, run string) bundle.Context {
	return bundle.Context{Kind: "manifest", Name: spool.ManifestName(gen, run)}
}

// Committed lists the committed generations, newest first.
func Committed(ctx context.Context, sp spool.Spool) ([]uint64, error) {
	var gens []uint64
	err := sp.List(ctx, spool.CommitPrefix, func(i spool.Info) error {
		g, err := spool.ParseCommitName(i.Name)
		if err != nil {
			return nil // spool verify reports strays
		}
		gens = append(gens, g)
		return nil
	})
	for i, j := 0, len(gens)-1; i < j; i, j = i+1, j-1 {
		gens[i], gens[j] = gens[j], gens[i]
	}
	return gens, err
}

// ReadCommit reads and verifies generation gen's commit.
func ReadCommit(ctx context.Context, sp spool.Spool, gen uint64, mesh ed25519.PublicKey) (*Commit, error) {
	data, err := sp.Get(ctx, spool.CommitName(gen), 1<<16)
	if err != nil {
		return nil, err
	}
	var c Commit
	if err := bundle.OpenSignedTOML(data, CommitCtx(gen), mesh, &c); err != nil {
		return nil, fmt.Errorf("commit of generation %d: %w", gen, err)
	}
	if c.Generation != gen {
		return nil, fmt.Errorf("commit of generation %d names generation %d", gen, c.Generation)
	}
	return &c, nil
}

// ErrNoGeneration means nothing has been declared yet.
var ErrNoGeneration = errors.New("no generation has been declared")
