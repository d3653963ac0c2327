// Package generation owns the documents of a declared generation: the
// public commit that makes generation N exist (one create-if-absent write),
// the per-node declaration bundle sealed to that node, and the manifest,
// sealed to the mesh, that records what was assigned to whom so that the
// next declare can diff against it and report can tell assigned nodes from
// ineligible and unassigned ones. It also owns a mesh's history (history.go):
// each commit names the digest of the commit before it, so a generation has
// exactly one history, and a commit that does not verify is skipped, never
// obeyed.
//
// internal/declare writes these documents and internal/apply reads them;
// internal/declaration is the language they are resolved from.
package generation

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/ledger"
	"github.com/muster-tool/muster/internal/resource"
	"github.com/muster-tool/muster/spool"
)

// FormatVersion is the version of every document in this package but the
// commit.
const FormatVersion = 1

// CommitVersion is the version of the commit. Version 2 commits name the
// commit they follow (Previous), so a version 2 commit without one is a
// mesh's first; version 1 commits predate the history and say nothing
// about what came before them.
const CommitVersion = 2

// Commit is generation N's commit: public, signed by the mesh. It names the
// declare run whose bundles make up the generation and holds no host names
// and no resource content.
type Commit struct {
	Version    int       `toml:"version"`
	Generation uint64    `toml:"generation"`
	Run        string    `toml:"run"`
	DeclaredAt time.Time `toml:"declared_at"`
	// Previous is the digest of the commit this one follows, the commit
	// of PreviousGeneration (the newest before it when it was declared),
	// so that a generation has exactly one history. Both are empty in a
	// mesh's first commit, and in commits made before muster kept a
	// history.
	Previous           string `toml:"previous,omitempty"`
	PreviousGeneration uint64 `toml:"previous_generation,omitzero"`
	// ExpiresAt, when set (declare --valid-for), is when the generation
	// stops being current: a host past it still enforces it, but reports
	// a failed line saying it expired (see Expired).
	ExpiresAt time.Time `toml:"expires_at,omitempty"`

	// Digest is the digest of the commit object's bytes, what the next
	// commit names as Previous. It is computed when the commit is read,
	// never stored in it.
	Digest string `toml:"-"`
	// Data is the commit object's bytes, as read.
	Data []byte `toml:"-"`
}

// Expired reports whether the commit carries an expiry that now is past.
func (c *Commit) Expired(now time.Time) bool {
	return !c.ExpiresAt.IsZero() && now.After(c.ExpiresAt)
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

// Validate holds the declaration to the rules muster declare holds every
// declaration to: resource.Validate on its resources, and resource.Check
// on each recovery entry, whose paths a host may remove as orphans. It
// names the first entry at fault. A host runs it on every declaration
// before it changes anything.
func (nd *NodeDeclaration) Validate() error {
	if err := resource.Validate(nd.Resources); err != nil {
		return err
	}
	for i, e := range nd.Recovery {
		s := e.Spec()
		// What an orphan is removed as: its path, not its target,
		// which a ledger does not keep.
		if s.Kind == resource.Symlink && s.Target == "" {
			s.State = "absent"
		}
		if bad := resource.Check(&s); len(bad) > 0 {
			return fmt.Errorf("recovery copy entry %d of %d, %s: %v", i+1, len(nd.Recovery), resource.ShownID(&s), bad[0])
		}
	}
	return nil
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
	// Wave says which part of the fleet a staged rollout declared the
	// generation for (the waves and node patterns declare was given);
	// empty when it was declared for every node.
	Wave string `toml:"wave,omitempty"`
	// Held lists the nodes the declaration selects but the wave left
	// out: they got nothing new and keep the generation they had.
	// Manifests of generations declared for every node have none.
	Held []ManifestHeld `toml:"held,omitempty"`
	// Resources lists every distinct resource the generation assigned,
	// sorted by ID and then digest; nodes name theirs by position (see
	// ManifestNode.Set), so a fleet whose nodes share most of their
	// resources has a small manifest.
	Resources []ManifestResource `toml:"resource,omitempty"`
}

// ManifestHeld is a node a staged rollout held back: the identity it was
// held as, and the generation it keeps, the newest assigned to that
// identity before (0 if none was).
type ManifestHeld struct {
	Name       string `toml:"name"`
	NodeID     string `toml:"node_id"`
	Generation uint64 `toml:"generation,omitzero"`
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

// SettingsVersion is the version of the Settings document.
const SettingsVersion = 1

// Settings records, for the mesh only, the settings of every resource a
// declare run assigned, so that the next declare's dry run can show old
// and new values: Resources is in the order of the manifest's Resources,
// one for one. Secret content is never in it, only its digest; gc removes
// it with the generation's declarations (spool.SettingsName).
type Settings struct {
	Version    int                `toml:"version"`
	Generation uint64             `toml:"generation"`
	Run        string             `toml:"run"`
	Resources  []SettingsResource `toml:"resource"`
}

// SettingsResource is one resource as declared; a secret's Content is
// empty and ContentSHA256 is the digest of its bytes.
type SettingsResource struct {
	resource.Spec
	ContentSHA256 string `toml:"content_sha256,omitempty"`
}

// SettingsCtx binds a settings document to its name.
func SettingsCtx(gen uint64, run string) bundle.Context {
	return bundle.Context{Kind: "settings", Name: spool.SettingsName(gen, run)}
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
	h, err := LoadHistory(ctx, sp, nil)
	if err != nil {
		return nil, err
	}
	return h.listed, nil
}

// ReadCommit reads and verifies generation gen's commit. An error that is
// not about reaching the spool wraps ErrUnverified: the object is junk to
// skip (see History), never to obey.
func ReadCommit(ctx context.Context, sp spool.Spool, gen uint64, mesh ed25519.PublicKey) (*Commit, error) {
	return readCommit(ctx, sp, gen, mesh, nil)
}

func readCommit(ctx context.Context, sp spool.Spool, gen uint64, mesh ed25519.PublicKey, known *Known) (*Commit, error) {
	data, err := sp.Get(ctx, spool.CommitName(gen), MaxCommit)
	if errors.Is(err, spool.ErrTooLarge) {
		return nil, &unverified{fmt.Errorf("commit of generation %d: %w", gen, err)}
	}
	if err != nil {
		return nil, err
	}
	return openCommit(data, gen, mesh, known)
}

// MaxCommit bounds the size of a commit object.
const MaxCommit = 1 << 16

// OpenCommit verifies the bytes of generation gen's commit against the
// mesh's signing key and decodes them. Its errors wrap ErrUnverified.
func OpenCommit(data []byte, gen uint64, mesh ed25519.PublicKey) (*Commit, error) {
	return openCommit(data, gen, mesh, nil)
}

// openCommit is OpenCommit, which takes bytes of known's digest (when
// known is of generation gen) without verifying their signature again.
func openCommit(data []byte, gen uint64, mesh ed25519.PublicKey, known *Known) (*Commit, error) {
	var c Commit
	err := ErrUnverified
	if sum, ok := known.sum(gen); ok {
		err = bundle.ReopenSignedTOML(data, sum, CommitCtx(gen), mesh, &c)
	}
	if err != nil {
		c = Commit{}
		err = bundle.OpenSignedTOML(data, CommitCtx(gen), mesh, &c)
	}
	if err != nil {
		return nil, &unverified{fmt.Errorf("commit of generation %d: %w", gen, err)}
	}
	if c.Generation != gen {
		return nil, &unverified{fmt.Errorf("commit of generation %d names generation %d", gen, c.Generation)}
	}
	if c.Version != 1 && c.Version != CommitVersion {
		return nil, &unverified{fmt.Errorf("commit of generation %d has version %d, which this muster does not know", gen, c.Version)}
	}
	if (c.Previous == "") != (c.PreviousGeneration == 0) || c.PreviousGeneration >= gen {
		return nil, &unverified{fmt.Errorf("commit of generation %d follows generation %d with digest %q", gen, c.PreviousGeneration, c.Previous)}
	}
	c.Digest, c.Data = Digest(data), data
	return &c, nil
}

// Digest is how a commit is named in the history: the SHA-256 of the
// object's bytes.
func Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// ShortDigest shortens a digest for messages: the algorithm and 12 hex
// digits, as much as a person compares by eye.
func ShortDigest(d string) string {
	if len(d) > len("sha256:")+12 {
		return d[:len("sha256:")+12]
	}
	return d
}

// ErrUnverified is wrapped by the errors of commits that fail
// verification: a foreign signature, a damaged object, a commit filed
// under another generation's name.
var ErrUnverified = errors.New("commit does not verify")

type unverified struct{ err error }

func (e *unverified) Error() string { return e.err.Error() }
func (e *unverified) Unwrap() []error {
	return []error{e.err, ErrUnverified}
}

// ErrNoGeneration means nothing has been declared yet.
var ErrNoGeneration = errors.New("no generation has been declared")
