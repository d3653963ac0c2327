// Package apply owns what a host does from its timer: fetch its newest
// committed declaration, reconcile every resource, read every resource back,
// clean orphans, and write a signed report that says only what was
// verified. A report that cannot be sent waits in the outbox; host state is
// written atomically and fails closed when corrupt.
package apply

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/internal/host"
	"github.com/muster-tool/muster/internal/ledger"
	"github.com/muster-tool/muster/internal/outcome"
	"github.com/muster-tool/muster/internal/report"
	"github.com/muster-tool/muster/internal/resource"
	"github.com/muster-tool/muster/spool"
)

// Options steer one apply.
type Options struct {
	Config   *host.Config
	Identity *host.Identity
	Spool    spool.Spool
	Root     string
	DryRun   bool
	Version  string
	Now      func() time.Time
	Packages resource.Packages
	Services resource.Services
}

// Result says what an apply did.
type Result struct {
	// Generation applied; 0 when nothing is declared for this node.
	Generation uint64
	Newest     uint64
	Report     *report.Report
	// Sent: the report reached the spool; otherwise it waits in the
	// outbox. Flushed counts older reports sent from the outbox first.
	Sent      bool
	SendError error
	Flushed   int
	// Nothing: no generation is declared for this node yet.
	Nothing bool
	// Counts of line statuses.
	Unchanged, Changed, Removed, Failed int
}

// Run performs one apply.
func Run(ctx context.Context, o Options) (*Result, error) {
	state := o.Config.State
	lk, err := takeLock(state)
	if err != nil {
		return nil, err
	}
	defer lk.release()

	st, hadState, err := loadState(state)
	if err != nil {
		return nil, err
	}
	res := &Result{}
	if !o.DryRun {
		res.Flushed, _ = flushOutbox(ctx, o.Spool, state)
	}
	start := o.Now()
	nodeID := o.Identity.NodeID()
	meshSign, err := o.Identity.Mesh.Verifier()
	if err != nil {
		return nil, err
	}
	gen, commit, newest, err := findGeneration(ctx, o.Spool, nodeID, meshSign, st.Generation)
	if err != nil {
		return nil, err
	}
	res.Newest = newest
	if gen == 0 {
		res.Nothing = true
		return res, nil
	}
	nd, err := fetchDeclaration(ctx, o, gen, commit.Run, nodeID)
	if err != nil {
		return nil, err
	}
	led, hadLedger, err := loadLedger(state)
	if err != nil {
		return nil, err
	}
	var notes []string
	if !hadLedger && len(nd.Recovery) > 0 {
		led = ledger.FromEntries(nd.Recovery)
		from := nd.RecoveryFrom
		if from == nodeID {
			from = "this identity"
		} else {
			from = "identity " + from
		}
		notes = append(notes, fmt.Sprintf("ledger rebuilt from the mesh's recovery copy (%d resources, reported by %s)", len(led), from))
	}
	if !hadState && st.Generation == 0 && hadLedger {
		notes = append(notes, "state file was missing: started from the newest committed generation")
	}

	sys := &resource.System{Root: o.Root, Packages: o.Packages, Services: o.Services, DryRun: o.DryRun, Prune: nd.Prune}
	results := sys.Apply(ctx, nd.Resources)
	declared := make(map[string]bool, len(nd.Resources))
	for _, s := range nd.Resources {
		declared[s.ID()] = true
	}
	lines := make([]outcome.Line, 0, len(results))
	newLedger := ledger.Ledger{}
	for i, r := range results {
		s := nd.Resources[i]
		lines = append(lines, outcome.Line{ID: r.ID, Status: r.Status, Detail: r.Detail, Digest: r.Digest})
		old, owned := led[r.ID]
		switch {
		case r.Status != outcome.Failed:
			newLedger[r.ID] = ledger.Entry{ID: r.ID, Kind: s.Kind, Path: s.Path, Name: s.Name, Digest: r.Digest, Created: old.Created || r.Created}
		case owned:
			newLedger[r.ID] = old
		case r.Created:
			newLedger[r.ID] = ledger.Entry{ID: r.ID, Kind: s.Kind, Path: s.Path, Name: s.Name, Created: true}
		}
	}
	// Orphans: owned, and no longer declared.
	orphans := led.Orphans(declared)
	var remove []resource.Spec
	var removeIDs []string
	for _, e := range orphans {
		if removable(e, nd.Prune) {
			remove = append(remove, e.Spec())
			removeIDs = append(removeIDs, e.ID)
			continue
		}
		why := "muster did not create it"
		if e.Kind == resource.Package && e.Created {
			why = "packages are removed only when the declaration sets prune = true"
		}
		lines = append(lines, outcome.Line{ID: e.ID, Status: outcome.Warn, Detail: "orphan: no declaration names it any more; left in place because " + why})
	}
	if len(remove) > 0 {
		for i, r := range sys.RemoveAll(ctx, remove) {
			l := outcome.Line{ID: removeIDs[i], Status: r.Status, Detail: r.Detail}
			if r.Status == outcome.Failed {
				l.Detail = "orphan could not be removed: " + r.Detail
				newLedger[removeIDs[i]] = led[removeIDs[i]]
			} else if o.DryRun {
				l.Detail = "orphan: would be removed"
			} else {
				l.Detail = "orphan removed"
			}
			lines = append(lines, l)
		}
	}
	for _, l := range lines {
		switch l.Status {
		case outcome.OK, outcome.Warn:
			res.Unchanged++
		case outcome.Changed:
			res.Changed++
		case outcome.Removed:
			res.Removed++
		default:
			res.Failed++
		}
	}
	rep := &report.Report{
		Version: report.FormatVersion, Node: o.Config.Node, NodeID: nodeID, Generation: gen,
		Start: start.UTC(), End: o.Now().UTC(), Muster: o.Version, NewestSeen: newest,
		Lines: lines, Notes: notes, Ledger: newLedger.Entries(),
	}
	res.Generation, res.Report = gen, rep
	if o.DryRun {
		return res, nil
	}
	// The report goes to the outbox first, so a crash from here on loses
	// nothing: the next run sends it.
	seq := uint64(o.Now().UnixNano())
	name := spool.ReportName(nodeID, gen, seq)
	rcpt, err := o.Identity.Mesh.Recipient()
	if err != nil {
		return nil, err
	}
	data, err := bundle.SealTOML(rep, report.Ctx(nodeID, gen, seq), o.Identity.Pair.Sign, rcpt)
	if err != nil {
		return nil, err
	}
	if err := outboxPut(state, name, data); err != nil {
		return nil, fmt.Errorf("keep report in the outbox: %w", err)
	}
	if err := saveLedger(state, newLedger); err != nil {
		return nil, err
	}
	st.Generation, st.Run, st.AppliedAt = gen, commit.Run, o.Now().UTC()
	if err := saveState(state, st); err != nil {
		return nil, err
	}
	n, err := flushOutbox(ctx, o.Spool, state)
	res.Flushed += n - 1
	if res.Flushed < 0 {
		res.Flushed = 0
	}
	res.Sent, res.SendError = err == nil, err
	return res, nil
}

// removable: muster removes only what it created; packages only with prune.
func removable(e ledger.Entry, prune bool) bool {
	if !e.Created {
		return false
	}
	switch e.Kind {
	case resource.File, resource.Directory, resource.Symlink:
		return true
	case resource.Package:
		return prune
	}
	return false
}

// findGeneration returns the newest committed generation that has a bundle
// for this node. A generation older than the last one applied is refused:
// that is a rollback.
func findGeneration(ctx context.Context, sp spool.Spool, nodeID string, meshSign ed25519.PublicKey, last uint64) (uint64, *generation.Commit, uint64, error) {
	gens, err := generation.Committed(ctx, sp)
	if err != nil {
		return 0, nil, 0, err
	}
	var newest uint64
	if len(gens) > 0 {
		newest = gens[0]
	}
	if newest < last {
		return 0, nil, newest, fault.WithHint(fault.Refusedf("rollback refused: the newest generation in spool %s is %d, older than generation %d this host already applied", sp, newest, last),
			"if the spool was restored from an old copy, sync the newer objects back into it")
	}
	for _, g := range gens {
		c, err := generation.ReadCommit(ctx, sp, g, meshSign)
		if err != nil {
			var fe *fault.Error
			if errors.As(err, &fe) {
				return 0, nil, newest, err
			}
			return 0, nil, newest, fault.New(fault.Refused, err)
		}
		_, err = sp.Stat(ctx, spool.DeclName(g, c.Run, nodeID))
		if errors.Is(err, spool.ErrNotFound) {
			if g <= last {
				break
			}
			continue
		}
		if err != nil {
			return 0, nil, newest, err
		}
		if g < last {
			return 0, nil, newest, fault.Refusedf("rollback refused: the newest generation for this node is %d, older than generation %d it already applied", g, last)
		}
		return g, c, newest, nil
	}
	if last > 0 {
		return 0, nil, newest, fault.Refusedf("rollback refused: generation %d, which this host applied, is no longer in spool %s and no newer one is declared for it", last, sp)
	}
	return 0, nil, newest, nil
}

func fetchDeclaration(ctx context.Context, o Options, gen uint64, run, nodeID string) (*generation.NodeDeclaration, error) {
	name := spool.DeclName(gen, run, nodeID)
	data, err := o.Spool.Get(ctx, name, 0)
	if err != nil {
		return nil, err
	}
	meshSign, err := o.Identity.Mesh.Verifier()
	if err != nil {
		return nil, err
	}
	var nd generation.NodeDeclaration
	if err := bundle.OpenTOML(data, generation.DeclCtx(gen, run, nodeID), o.Identity.Pair.Age, meshSign, &nd); err != nil {
		return nil, fault.New(fault.Refused, fmt.Errorf("declaration %s refused: %w", name, err))
	}
	if nd.NodeID != nodeID || nd.Generation != gen || nd.Run != run {
		return nil, fault.Refusedf("declaration %s refused: it is addressed to node %s, generation %d", name, nd.NodeID, nd.Generation)
	}
	return &nd, nil
}

// flushOutbox sends waiting reports, oldest first, and returns how many were
// sent. A report the spool already holds with the same bytes counts as sent.
func flushOutbox(ctx context.Context, sp spool.Spool, state string) (int, error) {
	items, err := outboxList(state)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, it := range items {
		data, err := os.ReadFile(it.file)
		if err != nil {
			return n, err
		}
		if err := sp.Put(ctx, it.name, data); err != nil {
			return n, err
		}
		if err := os.Remove(it.file); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
