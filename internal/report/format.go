// Package report owns the report: the document a host writes after every
// apply, and its codec. The mesh's reading of all of them is package
// fleet's.
package report

import (
	"time"

	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/ledger"
	"github.com/muster-tool/muster/internal/outcome"
	"github.com/muster-tool/muster/spool"
)

// FormatVersion is the version of the report document.
const FormatVersion = 1

// Report is what a host writes after an apply, signed by its key and
// encrypted to the mesh. Its outcome is computed from its lines by
// outcome.Of; it carries no outcome of its own.
type Report struct {
	Version    int       `toml:"version"`
	Node       string    `toml:"node"`
	NodeID     string    `toml:"node_id"`
	Generation uint64    `toml:"generation"`
	Start      time.Time `toml:"start"`
	End        time.Time `toml:"end"`
	Muster     string    `toml:"muster"`
	// NewestSeen is the newest committed generation the host saw.
	NewestSeen uint64 `toml:"newest_seen"`
	// Commit is the digest of the commit of Generation the host applied,
	// so the mesh can tell a node that applied another history's
	// generation N from one that applied its own.
	Commit string `toml:"commit,omitempty"`
	// Lines: one per resource (ok = unchanged, changed, removed, failed)
	// and per orphan, plus lines for the apply itself (e.g. an upgrade).
	Lines []outcome.Line `toml:"line"`
	// Notes say what else happened: a ledger recovered from the recovery
	// copy, an upgrade rolled back.
	Notes []string `toml:"notes,omitempty"`
	// Ledger is the recovery copy: what the host owns after this apply.
	Ledger []ledger.Entry `toml:"ledger,omitempty"`
}

// Outcome is computed from the lines.
func (r *Report) Outcome() outcome.Outcome { return outcome.Of(r.Lines) }

// Ctx binds a report to its name.
func Ctx(nodeID string, gen, seq uint64) bundle.Context {
	return bundle.Context{Kind: "report", Node: nodeID, Name: spool.ReportName(nodeID, gen, seq)}
}
