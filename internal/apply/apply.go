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
	"path/filepath"
	"time"

	"github.com/muster-tool/muster/internal/brief"
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
	// own (see gogc.go); only the apply command sets it.
	TuneGC bool
	// Waiting, when set, tells a run with nothing declared whether this
	// host's join is still waiting for the mesh or was refused: such a
	// host sends no fresh briefing (its join sent one).
	Waiting func(ctx context.Context) bool
}

// Result says what an apply did.
type Result struct {
	// Generation applied; 0 when nothing is declared for this node.
	Generation uint64
	Newest     uint64
	Report     *report.Report
	// Nothing: no generation is declared for this node yet. Notes then
	// say what the run did all the same (such as send a briefing).
	Nothing bool
	Notes   []string
	// The report's lines by status.
	outcome.Counts
	// Where the report went.
	Delivery
	// Quiet: the report had nothing new to say and the last one went
	// out less than the contact interval ago, so none was sent.
	Quiet bool
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

// Delivery says where a run's report went.
type Delivery struct {
	// Sent: the report reached the spool; otherwise it waits in the
	// outbox. Flushed counts older reports sent from the outbox first.
	Sent      bool
	SendError error
	Flushed   int
}

// Run performs one apply: under the host's lock, it prepares (reads the
// state, fetches the declaration), reconciles (changes and reads back
// every resource), accounts (the lines and the report) and delivers (keeps
// the state and sends the report, in the order that loses nothing to a
// crash; see persist.go). When it fails it may still return a Result, with
// Warnings and, once the work is done, the report's lines.
func Run(ctx context.Context, o Options) (*Result, error) {
	gc := tuneGC(o.TuneGC)
	defer gc.done()
	lk, err := takeLock(o.Config.State)
	if err != nil {
		return nil, err
	}
	defer lk.release()
	r := &run{o: o, state: o.Config.State, gc: gc}
	if err := r.prepare(ctx); err != nil {
		return r.res, err
	}
	if !o.DryRun && !(r.res.Nothing && o.Waiting != nil && o.Waiting(ctx)) {
		r.rebrief(ctx)
	}
	if r.res.Nothing {
		r.res.Notes = r.notes
		if r.briefed {
			// Nothing else will keep the state this run.
			if err := saveState(r.state, r.key, r.st); err != nil {
				r.res.Warnings = append(r.res.Warnings, fmt.Sprintf("the briefing was sent, but the state could not be kept: %v", err))
			}
		}
		return r.res, nil
	}
	gc.declared(len(r.nd.Resources))
	if err := r.reconcile(ctx); err != nil {
		return r.res, err
	}
	r.account()
	if o.DryRun {
		return r.res, nil
	}
	return r.res, r.deliver(ctx)
}

// run is one apply as it goes.
type run struct {
	o     Options
	gc    *gcTuner
	state string // the state directory
	key   stateKey
	res   *Result

	// prepare
	st                  *State
	hadState, hadLedger bool
	led                 ledger.Ledger // what the host owned before this run
	// ledIDs are led's ids in its file's order, which spares sorting
	// its entries for the report when the run keeps it.
	ledIDs   []string
	known    []resource.Fingerprint
	nodeID   string
	meshSign ed25519.PublicKey
	start    time.Time
	f        fetch
	gen      uint64
	commit   *generation.Commit
	nd       *generation.NodeDeclaration
	notes    []string

	// briefed: this run sent a briefing (rebrief), so the state changed.
	briefed bool

	// reconcile
	up        *upgrade.Upgrade
	lines     []outcome.Line
	newLedger ledger.Ledger // what the host owns after it
	// ledgerKept: newLedger is the ledger before itself, which the run
	// found to hold exactly what it owns after.
	ledgerKept bool
}

// prepare reads the host's state and fetches the generation to apply and
// this node's declaration of it. Both state files are read before
// anything is changed, so a corrupt one stops the run before it touches
// the system; the declaration is fetched meanwhile, which only reads the
// spool (and fills the declaration cache). Earlier reports waiting in the
// outbox are sent first. r.res is nil when the run stops before the fetch.
func (r *run) prepare(ctx context.Context) error {
	o := r.o
	if !o.DryRun {
		// Under the lock no other apply is writing: temp files left
		// here are from a run that was killed.
		removeStaleTemps(r.state)
		// A cache: the next run derives the key's public half again
		// without it.
		_ = host.KeepPublicKey(o.Config, o.Identity)
	}
	var err error
	if r.key, err = newStateKey(o.Identity.Pair.Sign); err != nil {
		return err
	}
	if r.st, r.hadState, err = loadState(r.state, r.key); err != nil {
		return err
	}
	r.nodeID = o.Identity.NodeID()
	if r.meshSign, err = o.Identity.Mesh.Verifier(); err != nil {
		return err
	}
	r.start = o.Now()
	fetched := make(chan fetch, 1)
	go func() { fetched <- fetchNewest(ctx, o, r.meshSign, r.nodeID, r.st) }()
	if r.led, r.ledIDs, r.hadLedger, err = loadLedger(r.state, r.key); err != nil {
		<-fetched
		return err
	}
	if !o.DryRun {
		r.known = loadFingerprints(r.state)
	}
	res := &Result{}
	r.res = res
	if !o.DryRun {
		// Earlier reports first, oldest first; a failure here is
		// retried when this run's report is sent.
		sent, _ := flushOutbox(ctx, o.Spool, r.state)
		res.Flushed = len(sent)
	}
	f := <-fetched
	r.f = f
	res.Newest = f.newest
	for _, sk := range f.skipped {
		res.Warnings = append(res.Warnings, sk.String()+" (not the mesh's; never applied)")
	}
	for _, j := range f.junk {
		res.Warnings = append(res.Warnings, j+" (skipped, never applied)")
	}
	res.Warnings = append(res.Warnings, f.notes...)
	if f.err != nil {
		return f.err
	}
	if f.gen == 0 {
		res.Nothing = true
		return nil
	}
	r.gen, r.commit, r.nd = f.gen, f.commit, f.nd
	if f.decoded {
		// A declaration from the cache passed this check when it was
		// cached, by this muster version (the cache is bound to it).
		if err := checkDeclaration(r.gen, r.nd); err != nil {
			return err
		}
		if !o.DryRun {
			saveCachedDeclaration(r.state, o.Identity.Pair.Sign, spool.DeclName(f.gen, f.commit.Run, r.nodeID), f.sum, o.Version, f.nd)
		}
	}
	if !r.hadLedger && len(r.nd.Recovery) > 0 {
		r.led = ledger.FromEntries(r.nd.Recovery)
		from := "this identity"
		if r.nd.RecoveryFrom != "" && r.nd.RecoveryFrom != r.nodeID {
			from = "identity " + r.nd.RecoveryFrom
		}
		r.notes = append(r.notes, fmt.Sprintf("ledger rebuilt from the mesh's recovery copy (%d resources, reported by %s)", len(r.led), from))
	}
	if !r.hadState {
		// The mesh must see it: a host whose state was removed no
		// longer knows what it applied, so rollback protection starts
		// again from here.
		r.notes = append(r.notes, "started without state (no state.toml): a first run, or the host's state was removed; it took the newest committed generation for it")
	}
	return nil
}

// rebrief sends a fresh briefing when the mesh's view of this node may be
// out of date: the gist of what the checks find (outcome, failed lines,
// facts) differs from the last briefing this host's apply sent, or none
// was sent yet. So a host that was ineligible and is fixed becomes eligible
// with no trip to it, and templates see facts that changed. The spool was
// just read, so its check asks nothing more of it. Failing to send is a
// warning: the next run tries again.
func (r *run) rebrief(ctx context.Context) {
	o := r.o
	th := o.Config.Brief.WithDefaults()
	b := brief.Run(ctx, brief.Env{Node: o.Config.Node, Root: o.Root, State: r.state, Spool: o.Spool, SpoolReached: true,
		MinFreeStateMB: th.MinFreeStateMB, MinFreeRootMB: th.MinFreeRootMB, Version: o.Version, Now: o.Now()})
	gist := b.Gist()
	if gist == r.st.Briefing {
		return
	}
	if err := brief.Send(ctx, o.Spool, o.Identity, b, uint64(o.Now().UnixNano())); err != nil {
		r.res.Warnings = append(r.res.Warnings, fmt.Sprintf("a fresh briefing could not be sent (the next run tries again): %v", err))
		return
	}
	r.st.Briefing, r.briefed = gist, true
	r.notes = append(r.notes, fmt.Sprintf("sent a fresh briefing: %s", b.Outcome()))
}

// reconcile brings the mesh's package repository up to date when a
// package is declared, applies every resource (through the upgrade step,
// which watches the muster package), removes the orphans, and makes the
// lines and the new ledger.
func (r *run) reconcile(ctx context.Context) error {
	o, nd := r.o, r.nd
	// The mesh's package repository from the spool, verified, before
	// any package is applied, and only when a package is declared. A spool
	// that cannot be reached is a temporary failure of the run, before
	// anything changed, never a failed line: it is no fault of the host.
	// A repository that does not verify leaves the one from before in
	// place and fails a line.
	var repoLines []outcome.Line
	if !o.DryRun && declaresPackages(nd.Resources) {
		changed, skipped, err := repo.Materialize(ctx, o.Spool, r.meshSign, filepath.Join(o.Root, RepoDir))
		for _, sk := range skipped {
			r.res.Warnings = append(r.res.Warnings, sk+" (not the mesh's; never used)")
		}
		if err != nil && unreachable(ctx, err) {
			return fault.New(fault.Temporary, fmt.Errorf("the package repository in spool %s could not be read, nothing was changed: %w", o.Spool, err))
		}
		if err != nil {
			repoLines = append(repoLines, outcome.Line{ID: RepoLineID, Status: outcome.Failed, Detail: err.Error()})
		}
		if u, ok := o.Packages.(interface{ RequestUpdate() }); changed && ok {
			u.RequestUpdate()
		}
	}

	// Checked: prepare held the declaration to Validate (checkDeclaration),
	// or took it from the cache, which holds only one that passed.
	sys := &resource.System{Root: o.Root, Packages: o.Packages, Services: o.Services, DryRun: o.DryRun, Prune: nd.Prune, Known: r.known, Now: o.Now, Owns: r.led.Owns, Checked: true}
	staging := &stagingNote{dir: r.state}
	if !o.DryRun {
		sys.SweepTemps = staging.found()
		sys.BeforeStaging = staging.write
	}
	r.up = upgrade.New(upgrade.Options{Root: o.Root, State: r.state, Config: o.ConfigPath, Spool: o.Config.Spool,
		Packages: o.Packages, CheckTimeout: o.CheckTimeout, DryRun: o.DryRun, Now: o.Now}, r.st.FailedVersions)
	results := r.up.Apply(ctx, sys, nd.Resources)
	if !o.DryRun {
		// Every temp file of this run is renamed or removed by now, and
		// those of a killed one swept.
		staging.clear()
		// A cache: a run goes on without it. Taking the fingerprints
		// lets go of the run's state of each resource.
		_ = keepFingerprints(r.state, r.known, sys.Fingerprints())
		r.gc.released()
	}
	// What this host owns after the run, entry by entry, given what the
	// ledger before holds under the resource's id: the rule is here
	// alone, for both passes below.
	entry := func(i int, old ledger.Entry, owned bool) (ledger.Entry, bool) {
		res, s := &results[i], &nd.Resources[i]
		switch {
		case declaredAbsent(s):
			// Nothing is owned where the declaration wants nothing.
		case res.Status != outcome.Failed:
			return ledger.Entry{ID: res.ID, Kind: s.Kind, Path: s.Path, Name: s.Name, Digest: res.Digest, Created: old.Created || res.Created}, true
		case owned:
			return old, true
		case res.Created:
			return ledger.Entry{ID: res.ID, Kind: s.Kind, Path: s.Path, Name: s.Name, Created: true}, true
		}
		return ledger.Entry{}, false
	}
	// Most runs from a timer own exactly what the ledger before says:
	// that ledger is then the one after, and no copy of it is made (for a
	// host of 100,000 files, about 20 MiB held to the end of the run).
	// Every entry the ledger before holds is then declared, so nothing
	// is an orphan. The pass that makes the lines tells, with one lookup
	// of each resource in the ledger before.
	lines := make([]outcome.Line, 0, len(results))
	var tally ledgerTally
	for i := range results { // one per resource, in order, with its ID
		res := &results[i]
		old, owned := r.led[res.ID]
		l := outcome.Line{ID: res.ID, Status: res.Status, Detail: res.Detail, Digest: res.Digest}
		if !o.DryRun && owned {
			lostChange(&l, old)
		}
		lines = append(lines, l)
		if e, ok := entry(i, old, owned); ok {
			tally.add(e, old, owned)
		}
	}
	newLedger := r.led
	r.ledgerKept = tally.sameAs(r.led)
	if !r.ledgerKept {
		declared := make(map[string]bool, len(results))
		newLedger = make(ledger.Ledger, len(results))
		for i, res := range results {
			declared[res.ID] = true
			old, owned := r.led[res.ID]
			if e, ok := entry(i, old, owned); ok {
				newLedger[e.ID] = e
			}
		}
		lines = append(lines, orphans(ctx, sys, r.led, nd.Resources, declared, nd.Prune, newLedger)...)
	}
	lines = append(append(lines, r.up.Lines()...), repoLines...)
	if r.commit.Expired(o.Now()) {
		lines = append(lines, expiredLine(r.commit))
	}
	r.notes = append(r.notes, r.up.Notes()...)
	// A detail can quote what this host found (a file name in a tree
	// someone else writes to, a tool's output): it is printed and sent as
	// one line of text that cannot steer a terminal.
	for i := range lines {
		lines[i].Detail = outcome.Printable(lines[i].Detail)
	}
	r.lines, r.newLedger = lines, newLedger
	return nil
}

// ledgerTally tells, entry by entry, whether the entries a run gives
// (one a resource, by distinct ids) are exactly the entries of the ledger
// before.
type ledgerTally struct {
	differs bool
	kept    int
}

// add counts entry e, given what the ledger before holds under its id
// (owned: it holds old).
func (t *ledgerTally) add(e, old ledger.Entry, owned bool) {
	t.differs = t.differs || !owned || old != e
	t.kept++
}

// sameAs reports whether the entries counted are exactly led's.
func (t *ledgerTally) sameAs(led ledger.Ledger) bool { return !t.differs && t.kept == len(led) }

// ledgerEntries are the entries of the ledger after the run, sorted by
// id: those of the ledger file in its order when the run kept it.
func (r *run) ledgerEntries() []ledger.Entry {
	if r.ledgerKept {
		if es := r.led.InOrder(r.ledIDs); es != nil {
			return es
		}
	}
	return r.newLedger.Entries()
}

// account counts the lines and makes the report, whose outcome is
// computed from them.
func (r *run) account() {
	r.res.Counts = outcome.Tally(r.lines)
	r.res.Generation = r.gen
	r.res.Report = &report.Report{
		Version: report.FormatVersion, Node: r.o.Config.Node, NodeID: r.nodeID, Generation: r.gen,
		Start: r.start.UTC(), End: r.o.Now().UTC(), Muster: r.o.Version, NewestSeen: r.f.newest, Commit: r.commit.Digest,
		Lines: r.lines, Notes: r.notes, Ledger: r.ledgerEntries(),
	}
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

// RepoDir is where, below the root apply acts in, the mesh's package
// repository is materialized: one place whatever the state directory, so
// that one declared apt source (examples/declaration/upgrade.toml) fits
// every host; RepoLineID is the report line of a repository that could
// not be.
const (
	RepoDir    = "/var/lib/muster/repo"
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
