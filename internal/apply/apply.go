// Package apply owns what a host does from its timer: fetch its newest
// committed declaration, reconcile every resource, read every resource back,
// clean orphans, and write a signed report that says only what was
// verified. A report that cannot be sent waits in the outbox; host state is
// written atomically and fails closed when corrupt.
package apply

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
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

// orphans removes or reports what the ledger holds and the declaration no
// longer names. Orphans that stay owned (their removal failed) go back into
// newLedger.
func orphans(ctx context.Context, sys *resource.System, led ledger.Ledger, specs []resource.Spec, declared map[string]bool, prune bool, newLedger ledger.Ledger) []outcome.Line {
	var lines []outcome.Line
	var remove []resource.Spec
	var removeIDs []string
	for _, e := range led.Orphans(declared) {
		if e.Kind == resource.Directory {
			// A directory that declared paths still lie under stays
			// owned, silently: it goes once they have gone.
			if under := declaredUnder(e.Path, specs); under != "" {
				newLedger[e.ID] = e
				lines = append(lines, outcome.Line{ID: e.ID, Status: outcome.OK, Detail: "orphan: kept while declared " + under + " lies under it"})
				continue
			}
		}
		if removable(e, prune) {
			remove = append(remove, e.Spec())
			removeIDs = append(removeIDs, e.ID)
			continue
		}
		var why string
		switch {
		case e.Kind == resource.Service:
			why = "muster does not remove units"
		case e.Kind == resource.Package && e.Created:
			why = "packages are removed only when the declaration sets prune = true"
		default:
			why = "muster did not create it"
		}
		lines = append(lines, outcome.Line{ID: e.ID, Status: outcome.Warn, Detail: "orphan: no declaration names it any more; left in place because " + why})
	}
	if len(remove) == 0 {
		return lines
	}
	for i, r := range sys.RemoveAll(ctx, remove) {
		l := outcome.Line{ID: removeIDs[i], Status: r.Status}
		switch {
		case r.Status == outcome.Failed:
			l.Detail = "orphan could not be removed: " + r.Detail
			newLedger[removeIDs[i]] = led[removeIDs[i]]
		case r.Status == outcome.Warn:
			// Left in place but still owned: it goes once it can.
			l.Detail = "orphan: " + r.Detail
			newLedger[removeIDs[i]] = led[removeIDs[i]]
		case sys.DryRun && r.Status == outcome.Removed:
			l.Detail = "orphan: would be removed"
		case r.Status == outcome.Removed:
			l.Detail = "orphan removed"
		case !sys.DryRun && r.Status == outcome.OK && remove[i].Kind != resource.Package:
			// Owned, and already gone: since this host last kept its
			// ledger it was removed, by a run whose report was lost
			// (see lostChange) or by hand. Either way the mesh has not
			// heard of it.
			l.Status = outcome.Removed
			l.Detail = "orphan removed since this host last reported (by a run whose report was lost, or by hand)"
		default:
			l.Detail = "orphan: " + r.Detail
		}
		lines = append(lines, l)
	}
	return lines
}

// declaredUnder returns the first present path declared below dir, or "".
func declaredUnder(dir string, specs []resource.Spec) string {
	prefix := strings.TrimSuffix(dir, "/") + "/"
	for i := range specs {
		s := &specs[i]
		switch s.Kind {
		case resource.File, resource.Directory, resource.Symlink:
			if !declaredAbsent(s) && strings.HasPrefix(s.Path, prefix) {
				return s.Path
			}
		}
	}
	return ""
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

// findGeneration returns the newest commit that verifies and has a bundle
// for this node, and the newest generation that verifies. Commits that do
// not verify are skipped (f.skipped), never obeyed. It refuses a rollback
// (a generation older than the one applied in st) and a fork: another
// commit of the generation applied, or a newer commit whose history does
// not hold the one applied (when that history is in the spool).
//
// A generation in skip is taken to have no declaration for this node (its
// declaration did not verify).
func findGeneration(ctx context.Context, sp spool.Spool, nodeID string, meshSign ed25519.PublicKey, st *State, skip map[uint64]bool) (f fetch) {
	hist, err := generation.LoadHistory(ctx, sp, meshSign)
	if err != nil {
		f.err = err
		return f
	}
	defer func() { f.skipped = hist.Skipped }()
	last := st.Generation
	var chosen *generation.Commit
	f.err = hist.Each(ctx, func(c *generation.Commit) (bool, error) {
		if f.newest == 0 {
			f.newest = c.Generation
			if c.Generation < last {
				return false, fault.WithHint(fault.Refusedf("rollback refused: the newest commit in spool %s is generation %d, older than generation %d, which this host already applied", sp, c.Generation, last),
					"if the spool was restored from an old copy, sync the newer objects back into it")
			}
		}
		if c.Generation == last && !st.applied(c) {
			return false, forkRefused(sp, fmt.Sprintf("the spool's commit of generation %d is %s, not %s, which this host applied", last, generation.ShortDigest(c.Digest), st.commitName()))
		}
		_, err := sp.Stat(ctx, spool.DeclName(c.Generation, c.Run, nodeID))
		if skip[c.Generation] {
			err = spool.ErrNotFound
		}
		switch {
		case errors.Is(err, spool.ErrNotFound):
			// Nothing for this node in c; an older one may have something,
			// but never one older than what it applied.
			return c.Generation > last, nil
		case err != nil:
			return false, err
		case c.Generation < last:
			return false, fault.Refusedf("rollback refused: the newest generation in spool %s with a declaration for this node is generation %d, older than generation %d, which this host already applied", sp, c.Generation, last)
		}
		chosen = c
		return false, nil
	})
	if f.err != nil {
		return f
	}
	if chosen == nil {
		if last > 0 {
			f.err = fault.Refusedf("rollback refused: generation %d, which this host applied, is no longer in spool %s and no newer one is declared for it", last, sp)
		}
		return f
	}
	if chosen.Generation > last && st.Commit != "" {
		tr, err := hist.Trace(ctx, chosen, last, st.Commit)
		if err != nil {
			f.err = err
			return f
		}
		if tr.Verdict == generation.Diverges {
			what := "passes over it"
			if tr.Named != "" {
				what = "holds " + generation.ShortDigest(tr.Named) + " there"
			}
			f.err = forkRefused(sp, fmt.Sprintf("the history of generation %d (%s) does not hold generation %d as this host applied it (%s): it %s",
				chosen.Generation, generation.ShortDigest(chosen.Digest), last, st.commitName(), what))
			return f
		}
	}
	f.gen, f.commit = chosen.Generation, chosen
	return f
}

// forkRefused is the refusal of a commit from another history of the mesh
// than the one this host applied.
func forkRefused(sp spool.Spool, what string) error {
	return fault.WithHint(fault.Refusedf("fork refused: %s; spool %s holds another history of this mesh", what, sp),
		"the spool was restored from an older copy and declared on, or two copies grew apart: the mesh's operator should sync the copy this host applied from back into the spool (muster spool verify names the fork); "+
			"if the mesh has settled on the spool's history, reset this host's state as muster-apply(1) says under STATE")
}

// fetch is what fetchNewest found: the generation to apply (0: none), its
// commit and this node's declaration, the newest generation that
// verifies, and the commits skipped because they do not.
type fetch struct {
	gen, newest uint64
	commit      *generation.Commit
	nd          *generation.NodeDeclaration
	skipped     []generation.Skipped
	// junk are this node's declarations that did not verify, skipped.
	junk []string
	err  error
}

// fetchNewest finds the generation to apply after the one in st and
// fetches this node's declaration of it.
//
// A declaration that does not verify (signed by another key, sealed to
// another node, bound to another name) is junk anyone able to write to the
// spool could have left there: it is skipped, and the newest generation
// before it with a declaration for this node is taken instead, with the
// same rollback and fork rules.
func fetchNewest(ctx context.Context, o Options, meshSign ed25519.PublicKey, nodeID string, st *State) fetch {
	skip := map[uint64]bool{}
	var junk []string
	for {
		f := findGeneration(ctx, o.Spool, nodeID, meshSign, st, skip)
		f.junk = junk
		if f.err != nil || f.gen == 0 {
			return f
		}
		f.nd, f.err = fetchDeclaration(ctx, o, meshSign, f.gen, f.commit.Run, nodeID)
		if f.err == nil || fault.ClassOf(f.err) != fault.Refused {
			return f
		}
		skip[f.gen] = true
		junk = append(junk, f.err.Error())
	}
}

// fetchDeclaration reads this node's declaration of generation gen,
// verifies the mesh's signature and decrypts it, or takes it from the
// declaration cache when the object's bytes are the ones verified before.
func fetchDeclaration(ctx context.Context, o Options, meshSign ed25519.PublicKey, gen uint64, run, nodeID string) (*generation.NodeDeclaration, error) {
	name := spool.DeclName(gen, run, nodeID)
	data, err := o.Spool.Get(ctx, name, 0)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	state := o.Config.State
	nd, cached := loadCachedDeclaration(state, o.Identity.Pair.Sign, name, sum, o.Version)
	if !cached {
		nd = new(generation.NodeDeclaration)
		if err := bundle.OpenTOML(data, generation.DeclCtx(gen, run, nodeID), o.Identity.Pair.Age, meshSign, nd); err != nil {
			return nil, fault.New(fault.Refused, fmt.Errorf("declaration %s refused: %w", name, err))
		}
	}
	if nd.NodeID != nodeID || nd.Generation != gen || nd.Run != run {
		return nil, fault.Refusedf("declaration %s refused: it is addressed to node %s, generation %d", name, nd.NodeID, nd.Generation)
	}
	if !cached && !o.DryRun {
		saveCachedDeclaration(state, o.Identity.Pair.Sign, name, sum, o.Version, nd)
	}
	return nd, nil
}
