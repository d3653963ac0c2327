// Package apply owns what a host does from its timer: fetch its newest
// committed declaration, reconcile every resource, read every resource back,
// clean orphans, and write a signed report that says only what was
// verified. A report that cannot be sent waits in the outbox; host state is
// written atomically and fails closed when corrupt.
package apply

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/internal/host"
	"github.com/muster-tool/muster/internal/ledger"
	"github.com/muster-tool/muster/internal/outcome"
	"github.com/muster-tool/muster/internal/repo"
	"github.com/muster-tool/muster/internal/report"
	"github.com/muster-tool/muster/internal/resource"
	"github.com/muster-tool/muster/internal/upgrade"
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
	// ConfigPath is the host config file, for the self-check of a newly
	// installed muster.
	ConfigPath string
	// CheckTimeout bounds that self-check (upgrade.DefaultCheckTimeout
	// if zero).
	CheckTimeout time.Duration
	// TuneGC lets the run set the garbage collector for a process of its
	// own (see gc.go); only the apply command sets it.
	TuneGC bool
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
	// Counts of line statuses; Unchanged includes the warn lines, which
	// Warned counts again on their own.
	Unchanged, Changed, Removed, Failed int
	Warned                              int
	// Restart: this apply installed a new muster that passed its
	// self-check; the running one should exit for the restart.
	Restart bool
	// KnownGoodError: keeping this binary as the known-good muster
	// failed (the apply itself succeeded).
	KnownGoodError error
	// Warnings are what did not stop the run but its operator should
	// know, such as commits in the spool that do not verify.
	Warnings []string
}

// sendGrace bounds sending the report after a run's own deadline passed.
const sendGrace = time.Minute

// Run performs one apply. When it fails it may still return a Result
// carrying Warnings.
func Run(ctx context.Context, o Options) (*Result, error) {
	gc := tuneGC(o.TuneGC)
	defer gc.done()
	state := o.Config.State
	lk, err := takeLock(state)
	if err != nil {
		return nil, err
	}
	defer lk.release()
	if !o.DryRun {
		// Under the lock no other apply is writing: temp files left
		// here are from a run that was killed.
		removeStaleTemps(state)
	}

	// Both state files are read before anything is changed, so a corrupt
	// one stops the run before it touches the system. The generation and
	// its declaration are fetched meanwhile: that only reads the spool
	// (and fills the declaration cache).
	key, err := newStateKey(o.Identity.Pair.Sign)
	if err != nil {
		return nil, err
	}
	st, hadState, err := loadState(state, key)
	if err != nil {
		return nil, err
	}
	nodeID := o.Identity.NodeID()
	meshSign, err := o.Identity.Mesh.Verifier()
	if err != nil {
		return nil, err
	}
	start := o.Now()
	fetched := make(chan fetch, 1)
	go func() { fetched <- fetchNewest(ctx, o, meshSign, nodeID, st) }()
	led, hadLedger, err := loadLedger(state, key)
	if err != nil {
		<-fetched
		return nil, err
	}
	var known []resource.Fingerprint
	if !o.DryRun {
		known = loadFingerprints(state)
	}
	res := &Result{}
	if !o.DryRun {
		// Earlier reports first, oldest first; a failure here is
		// retried when this run's report is sent.
		sent, _ := flushOutbox(ctx, o.Spool, state)
		res.Flushed = len(sent)
	}
	f := <-fetched
	res.Newest = f.newest
	for _, sk := range f.skipped {
		res.Warnings = append(res.Warnings, sk.String()+" (not the mesh's; never applied)")
	}
	for _, j := range f.junk {
		res.Warnings = append(res.Warnings, j+" (skipped, never applied)")
	}
	if f.err != nil {
		return res, f.err
	}
	if f.gen == 0 {
		res.Nothing = true
		return res, nil
	}
	gen, commit, nd := f.gen, f.commit, f.nd
	if err := checkDeclaration(gen, nd); err != nil {
		return res, err
	}
	gc.declared(len(nd.Resources))
	var notes []string
	if !hadLedger && len(nd.Recovery) > 0 {
		led = ledger.FromEntries(nd.Recovery)
		from := "this identity"
		if nd.RecoveryFrom != "" && nd.RecoveryFrom != nodeID {
			from = "identity " + nd.RecoveryFrom
		}
		notes = append(notes, fmt.Sprintf("ledger rebuilt from the mesh's recovery copy (%d resources, reported by %s)", len(led), from))
	}
	if !hadState {
		// The mesh must see it: a host whose state was removed no
		// longer knows what it applied, so rollback protection starts
		// again from here.
		notes = append(notes, "started without state (no state.toml): a first run, or the host's state was removed; it took the newest committed generation for it")
	}

	// The mesh's package repository from the spool, verified, before
	// any package is applied, and only when a package is declared. A spool
	// that cannot be reached is a temporary failure of the run, before
	// anything changed, never a failed line: it is no fault of the host.
	// A repository that does not verify leaves the one from before in
	// place and fails a line.
	var repoLines []outcome.Line
	if !o.DryRun && declaresPackages(nd.Resources) {
		changed, skipped, err := repo.Materialize(ctx, o.Spool, meshSign, filepath.Join(state, RepoDir))
		for _, sk := range skipped {
			res.Warnings = append(res.Warnings, sk+" (not the mesh's; never used)")
		}
		if err != nil && unreachable(ctx, err) {
			return res, fault.New(fault.Temporary, fmt.Errorf("the package repository in spool %s could not be read, nothing was changed: %w", o.Spool, err))
		}
		if err != nil {
			repoLines = append(repoLines, outcome.Line{ID: RepoLineID, Status: outcome.Failed, Detail: err.Error()})
		}
		if u, ok := o.Packages.(interface{ RequestUpdate() }); changed && ok {
			u.RequestUpdate()
		}
	}

	sys := &resource.System{Root: o.Root, Packages: o.Packages, Services: o.Services, DryRun: o.DryRun, Prune: nd.Prune, Known: known, Now: o.Now, Owns: led.Owns}
	staging := &stagingNote{dir: state}
	if !o.DryRun {
		sys.SweepTemps = staging.found()
		sys.BeforeStaging = staging.write
	}
	up := upgrade.New(upgrade.Options{Root: o.Root, State: state, Config: o.ConfigPath, Spool: o.Config.Spool,
		Packages: o.Packages, CheckTimeout: o.CheckTimeout, DryRun: o.DryRun, Now: o.Now}, st.FailedVersions)
	results := up.Apply(ctx, sys, nd.Resources)
	if !o.DryRun {
		// Every temp file of this run is renamed or removed by now, and
		// those of a killed one swept.
		staging.clear()
		// A cache: a run goes on without it.
		_ = keepFingerprints(state, known, sys.Fingerprints())
	}
	declared := make(map[string]bool, len(results))
	for _, r := range results { // one per resource, in order, with its ID
		declared[r.ID] = true
	}
	lines := make([]outcome.Line, 0, len(results))
	newLedger := make(ledger.Ledger, len(results))
	for i, r := range results {
		s := &nd.Resources[i]
		old, owned := led[r.ID]
		l := outcome.Line{ID: r.ID, Status: r.Status, Detail: r.Detail, Digest: r.Digest}
		if !o.DryRun && owned {
			lostChange(&l, old)
		}
		lines = append(lines, l)
		switch {
		case declaredAbsent(s):
			// Nothing is owned where the declaration wants nothing.
		case r.Status != outcome.Failed:
			newLedger[r.ID] = ledger.Entry{ID: r.ID, Kind: s.Kind, Path: s.Path, Name: s.Name, Digest: r.Digest, Created: old.Created || r.Created}
		case owned:
			newLedger[r.ID] = old
		case r.Created:
			newLedger[r.ID] = ledger.Entry{ID: r.ID, Kind: s.Kind, Path: s.Path, Name: s.Name, Created: true}
		}
	}
	lines = append(lines, orphans(ctx, sys, led, nd.Resources, declared, nd.Prune, newLedger)...)
	lines = append(append(lines, up.Lines()...), repoLines...)
	if commit.Expired(o.Now()) {
		lines = append(lines, expiredLine(commit))
	}
	notes = append(notes, up.Notes()...)
	for _, l := range lines {
		switch l.Status {
		case outcome.OK:
			res.Unchanged++
		case outcome.Warn:
			res.Unchanged++
			res.Warned++
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
		Start: start.UTC(), End: o.Now().UTC(), Muster: o.Version, NewestSeen: f.newest, Commit: commit.Digest,
		Lines: lines, Notes: notes, Ledger: newLedger.Entries(),
	}
	res.Generation, res.Report = gen, rep
	if o.DryRun {
		return res, nil
	}

	// The work is done: the report goes out even when the run's time ran
	// out or it was told to stop, within a grace period of its own.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sendGrace)
	defer cancel()
	seq := uint64(o.Now().UnixNano())
	name := spool.ReportName(nodeID, gen, seq)
	rcpt, err := o.Identity.Mesh.Recipient()
	if err != nil {
		return nil, err
	}
	data, err := bundle.Seal(report.Marshal(rep), report.Ctx(nodeID, gen, seq), o.Identity.Pair.Sign, rcpt)
	if err != nil {
		return nil, err
	}
	// A report that says something changed goes to the outbox before the
	// state moves on, so a crash from here on loses nothing: the next run
	// sends it. A report of a run that changed nothing is sent directly
	// (it costs no fsync here) and kept only if sending fails; losing it
	// to a crash loses nothing the next run does not report again.
	journal := res.Changed+res.Removed+res.Failed+res.Warned > 0 || len(notes) > 0
	if journal {
		if err := outboxPut(state, name, data); err != nil {
			// The state disk is full or failing. The spool may take
			// the report directly; if it cannot either, the ledger is
			// left as it was, so the next run reports these changes
			// again (lostChange).
			if serr := o.Spool.Put(ctx, name, data); serr != nil {
				return res, fault.WithHint(fault.New(fault.Temporary, fmt.Errorf("the report could not be kept in the outbox (%v) nor sent to spool %s (%v)", err, o.Spool, serr)),
					"free space in the state directory "+state+" and make the spool reachable: the next run reports what this one changed")
			}
			res.Sent = true
			journal = false
		}
	}
	// The report is safe (in the outbox, or sent): the state moves on. A
	// state that cannot be kept (the disk is full) does not stop the
	// report going out; the next run starts from the state before, and
	// reports again what this one changed (lostChange).
	var keepErr error
	if !sameLedger(led, newLedger) || !hadLedger {
		keepErr = saveLedger(state, key, newLedger)
	}
	failedChanged := !slices.Equal(st.FailedVersions, up.Failed())
	if keepErr == nil && (!hadState || st.Generation != gen || st.Run != commit.Run || st.Commit != commit.Digest || failedChanged) {
		if st.Generation != gen {
			st.AppliedAt = o.Now().UTC()
		}
		st.Generation, st.Run, st.Commit = gen, commit.Run, commit.Digest
		st.FailedVersions = up.Failed()
		keepErr = saveState(state, key, st)
	}
	if keepErr != nil {
		sent, err := flushOutbox(ctx, o.Spool, state)
		for _, s := range sent {
			if s == name {
				res.Sent = true
			}
		}
		if !journal && err == nil && !res.Sent {
			res.Sent = o.Spool.Put(ctx, name, data) == nil
		}
		return res, fault.WithHint(fault.New(fault.Temporary, fmt.Errorf("the host's state could not be kept: %w", keepErr)),
			"free space in the state directory "+state+": the next run starts from the state before this one and reports what it changed")
	}
	// Only now that the state holds the failed version may the
	// launcher's rollback note go.
	if err := up.Saved(); err != nil {
		return nil, err
	}
	res.Restart = up.Restart()
	sent, err := flushOutbox(ctx, o.Spool, state)
	for _, s := range sent {
		if s == name {
			res.Sent = true
		} else {
			res.Flushed++
		}
	}
	if !journal {
		if err == nil {
			err = o.Spool.Put(ctx, name, data)
			res.Sent = err == nil
		}
		if err != nil {
			if perr := outboxPut(state, name, data); perr != nil {
				// Nothing changed, so nothing is lost: the next run
				// reports the same.
				return res, fault.New(fault.Temporary, fmt.Errorf("keep report in the outbox: %w (sending it failed: %v)", perr, err))
			}
		}
	}
	if !res.Sent {
		res.SendError = err
	}
	if res.Sent {
		// This run reached its end and its report is out: the binary
		// that ran it is known to work here.
		if _, err := upgrade.AfterReport(state, o.Root, o.Version); err != nil {
			res.KnownGoodError = err
		}
	}
	return res, nil
}

// ExpiryLineID is the report line of a generation past its expiry.
const ExpiryLineID = "muster:expiry"

// expiredLine fails a run that enforces a generation past the expiry its
// commit carries: nothing newer has reached the host (a frozen mirror, a
// stale copy of the spool), and the mesh must hear of it.
func expiredLine(c *generation.Commit) outcome.Line {
	return outcome.Line{ID: ExpiryLineID, Status: outcome.Failed, Detail: fmt.Sprintf(
		"generation %d expired at %s (declared at %s): nothing newer has reached this host; it still enforces generation %d and repairs drift",
		c.Generation, c.ExpiresAt.UTC().Format(time.RFC3339), c.DeclaredAt.UTC().Format(time.RFC3339), c.Generation)}
}

// RepoDir is where, below the state directory, the mesh's package
// repository is materialized; RepoLineID is the report line of a
// repository that could not be.
const (
	RepoDir    = "repo"
	RepoLineID = "muster:repository"
)

// lostChange makes an unchanged line changed when the resource is not in
// the state the ledger last recorded for it: the ledger is kept only after
// the run's report is safe (in the outbox or the spool), so a run whose
// report was lost (the state disk full, the spool gone) left the ledger as
// it was, and the change it made is reported now rather than never.
func lostChange(l *outcome.Line, old ledger.Entry) {
	if l.Status != outcome.OK || old.Digest == "" || l.Digest == "" || old.Digest == l.Digest {
		return
	}
	l.Status = outcome.Changed
	d := "changed since this host last reported (by a run whose report was lost, or by hand)"
	if l.Detail != "" {
		d = l.Detail + "; " + d
	}
	l.Detail = d
}

// declaresPackages reports whether specs install a package, which may come
// from the mesh's repository.
func declaresPackages(specs []resource.Spec) bool {
	for i := range specs {
		if specs[i].Kind == resource.Package && !declaredAbsent(&specs[i]) {
			return true
		}
	}
	return false
}

// unreachable reports whether err is about reaching the spool, which a
// later run may not meet, rather than about what it holds.
func unreachable(ctx context.Context, err error) bool {
	return ctx.Err() != nil || errors.Is(err, spool.ErrUnavailable) || fault.ClassOf(err) == fault.Temporary
}

// declaredAbsent: the spec asks for the resource not to exist.
func declaredAbsent(s *resource.Spec) bool {
	if s.Kind == resource.Package {
		return s.Version == "absent"
	}
	return s.State == "absent"
}
