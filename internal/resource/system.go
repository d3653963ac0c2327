// # Applying and reading back
//
// System.Apply reconciles a host with its specs in two phases. The change
// phase runs in order: specs are grouped by their effective order (Spec.Order,
// or DefaultOrder of the kind: packages 100, users and groups 150, files,
// directories and symlinks 200, services 300), lower first; inside a group
// packages come first (one Installed query and at most one Install and one
// Remove call for all of them), then users and groups (see accounts.go),
// then paths (shallow before deep for present ones, deep before shallow for
// absent ones, so a directory or declared symlink exists before what lies
// under it), then services. A service whose RestartOn names a path this run
// changed is restarted after all other changes, unless a path it names
// failed its validate command (validate.go). Directories with Purge are
// purged last (purge.go). The read-back phase then
// observes every spec again from scratch and compares it with the spec. The
// result of each line comes from that comparison alone: a line is ok or
// changed only when its read-back matched; a change step that failed makes it
// failed even if the read-back matched.
//
// The change phase's first look at a file that System.Known (the previous
// run's Fingerprints) vouches for takes its content as declared without
// reading it; the read-back reads every file regardless (see Fingerprint).
//
// Files are replaced through atomicfile.Batch: temp files staged beside their
// targets, one syncfs, renames, one fsync per directory. When only the mode
// or owner of a file differs it is fixed in place, without rewriting the
// content. Content is compared while it is hashed; only sha256 digests ever
// appear in a line's detail, never content, and never anything of a Secret
// spec but its digest; the one exception is the output of a file's validate
// command, of which validate.go says what is shown. Content that is not
// text (Spec.Encoding) is written as the bytes it decodes to, and its
// changes are shown by digest and size.
//
// Paths are confined to System.Root: every directory is reached from an open
// handle on the root by opening one name at a time without following
// symlinks, and a declared path containing ".." is refused. A symlink on the way
// to a declared path is followed only when the same apply declares it as a
// symlink and it points where declared; any other symlink fails the line with
// its path and target named. Missing parent directories are created with mode
// 0755, owned by the user running muster; they are not resources, so muster
// does not own or remove them. A directory declared absent is removed only
// when empty. Muster replaces a symlink by a file or directory, and a file by
// a symlink, when the declaration says so, but never replaces or removes a
// directory that is in the way of a file or symlink, nor a fifo, socket or
// device.
//
// Result.Created is true only where nothing was at the path (or the package
// was not installed) before this run made it, so the ledger of what a host
// owns holds only what muster made, and RemoveAll never deletes what muster
// found. System.DryRun observes and plans without touching anything: a line
// is ok when the resource already matches, changed (or removed) with a
// "would ..." detail when it would change, failed when applying would fail.
// A package line names the version it would go to; a service whose unit
// does not exist yet is planned, not failed, when a package the same run
// installs brings the unit (PackageFiles; see unitFromPackage).
//
// Services: enablement is always managed. Whether a unit runs is managed only
// where Services.CanRun: on the live system ("/") a spec declaring running
// where units cannot be started fails; under a root other than "/" (an image
// being prepared) only enablement is managed and verified, and the line's
// detail says running was not managed; a spec there that declares running but
// not enabled has nothing verifiable and fails. A restart that leaves the unit
// inactive fails the line.
//
// A line's Digest is sha256 over a canonical text of the verified state, one
// "key value" line each, in this order: "type <kind>", "path <path>" or "name
// <name>", then "absent" alone, or for a file "content sha256:<hex>", for a
// symlink "target <target>", "mode <octal>" (not for symlinks), "uid <n>",
// "gid <n>"; for a package "version <v>"; for a service "enabled <bool>" and
// "active <bool>" when read; for a group "gid <n>"; for a user "uid <n>",
// "gid <n>", "home <path>", "shell <path>" and "groups <a,b,...>".
package resource

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/muster-tool/muster/internal/atomicfile"
	"github.com/muster-tool/muster/internal/outcome"
)

// System is the host, or a directory tree standing for one, that Apply
// reconciles.
type System struct {
	// Root is "/" or a directory; every path is applied inside it. It
	// must be set: an empty Root is refused rather than taken as "/".
	Root string
	// Packages and Services may be nil when no spec needs them; a spec
	// that does then fails.
	Packages Packages
	Services Services
	// DryRun observes only: Changed means "would change", and nothing is
	// touched.
	DryRun bool
	// Prune lets Remove remove orphaned packages; without it they are
	// left installed.
	Prune bool

	// Owns reports whether the host owns the resource with this ID (its
	// ledger holds it). A declared file or directory replaces a symlink
	// at its path only when the host owns that symlink or the spec says
	// ReplaceSymlink. Nil owns nothing.
	Owns func(id string) bool

	// Checked: the specs given to Apply passed Validate (each Check,
	// and no Clashes), as apply holds every declaration to before it
	// applies it; Apply does not check them again (about 4% of a no-op
	// of 100,000 files). Without it, a spec that fails Check fails its
	// line, and both lines of a clash fail.
	Checked bool

	// Known holds the previous run's Fingerprints. The change phase of a
	// run that is not a dry run takes a file they vouch for to hold its
	// declared content without reading it; the read-back reads it all
	// the same.
	Known []Fingerprint
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// BeforeStaging, when set, runs once in a run, before the first temp
	// file is created beside a declared path; an error fails the change
	// that needed it. apply uses it to note that temp files may be left
	// behind if the run is killed.
	BeforeStaging func() error
	// SweepTemps: a run may have been killed while it had temp files
	// beside declared paths. Before the first look, the change phase
	// removes muster's temp files of the declared files and symlinks from
	// their directories (see atomicfile.IsTempOf). A dry run never does.
	SweepTemps bool

	// beforeReadBack, when set, runs between the change and read-back
	// phases. Tests use it to undo a change and prove that only the
	// read-back decides a line.
	beforeReadBack func()
	// last is the run of the last Apply, for Fingerprints, which keeps
	// what it found in fingerprints and lets go of last.
	last          *run
	fingerprints  []Fingerprint
	fingerprinted bool
}

// Result is the outcome of one spec.
type Result struct {
	// ID is Spec.ID().
	ID string
	// Status is outcome.OK (unchanged and verified), Changed, Removed or
	// Failed.
	Status outcome.Status
	// Detail says why a line failed (the backend's own message) or what
	// changed. It never holds file content, only digests, but for what
	// validate.go shows of a validate command's output.
	Detail string
	// Digest is the digest of the verified state, empty when failed.
	Digest string
	// Created: this run created the resource where nothing was before,
	// so the host owns it from now on.
	Created bool
}

// Line is the result as a report line.
func (r Result) Line() outcome.Line {
	return outcome.Line{ID: r.ID, Status: r.Status, Detail: r.Detail}
}

// DefaultOrder is the order of a kind when Spec.Order is 0.
func DefaultOrder(k Kind) int {
	switch k {
	case Package:
		return 100
	case User, Group:
		return 150
	case Service:
		return 300
	}
	return 200
}

// item is one spec on its way through a run.
type item struct {
	spec  *Spec
	order int
	// err: the spec cannot be applied at all (invalid, refused); no
	// change is attempted.
	err error

	content      string // a file's content, decoded (Spec.Bytes)
	mode         int    // -1: not declared
	uid, gid     int    // -1: not declared
	parent, base string
	dir          *os.File // parent's handle for the current observation
	// obs is the item's observation: the first look during the change
	// phase, replaced by the read-back, after which nothing reads the
	// first look. One per item keeps a run's memory, which a fresh
	// process pays for page by page, to what it needs.
	obs observed

	// more holds what few items need (see rare); nil until one does.
	more *rare
	// entry is the batch entry of the change: a staged file, or the
	// directory touched, whose sync decides whether the change holds.
	entry *atomicfile.Entry
	seq   int // when it changed, for restart ordering

	// The flags are kept together, as each alone would take a word of
	// a struct a host of 100,000 files holds 100,000 of.
	absent bool
	// leave: an orphan muster leaves alone (a unit, a package without
	// Prune, a user or group); its line says so and nothing is read.
	leave bool
	// pendingOwner: the owner or group is a user or group this run
	// makes, resolved by settleOwner when the path's group changes;
	// resettle: it exists, but this run may change its id, so
	// settleOwner looks it up again.
	pendingOwner, resettle bool
	// kept: an orphaned directory that could not be removed because it is
	// not empty; its line warns, with the note.
	kept bool

	changed bool
	removed bool
	created bool
	// verified: the read-back matched the spec.
	verified  bool
	restarted bool
}

// rare is what few items of a run need: what a change did or why it
// failed, a note, a purge's leftovers, a package's candidate version, a
// service's start. An item gets one on its first write (item.set), and
// one that never needs it reads the empty one (item.get): a host of
// 100,000 files that changes nothing holds none, which keeps item within
// 384 bytes.
type rare struct {
	// fatal: a change step for this line failed; the line fails
	// whatever its read-back says.
	fatal error
	// explain: a step shared with other lines (one package install)
	// failed; it explains a mismatch but does not fail a line whose
	// read-back matched.
	explain error
	what    []string
	note    string
	// purgeLeft: what a purge directory holds that a purge would remove,
	// as last observed (purge.go).
	purgeLeft []string

	candidate string // package version "latest" resolved to
	startSeq  int    // service started at
	// lookEnabled: the enablement the change phase's look found, for
	// a service it looked at.
	lookEnabled *bool
}

// noRare is what get returns for an item without its own rare. It is
// never written: a write goes through set.
var noRare rare

// get returns the item's rare for reading.
func (it *item) get() *rare {
	if it.more == nil {
		return &noRare
	}
	return it.more
}

// set returns the item's rare for writing, made on the first call.
func (it *item) set() *rare {
	if it.more == nil {
		it.more = &rare{}
	}
	return it.more
}

type run struct {
	s       *System
	ctx     context.Context
	items   []*item
	live    bool
	links   map[string]string
	t       *tree
	rootErr error
	batch   *atomicfile.Batch
	gen     int
	seq     int
	// changed maps each path changed in this run to when.
	changed map[string]int
	// invalid holds the paths whose new content failed its validate
	// command in this run; services restarted on them are not.
	invalid map[string]bool
	// secrets: lines of secret content, for validate's output.
	secrets []string
	// ids resolves owners; made again after accounts change.
	ids *ids
	// db is the accounts databases as last observed.
	db *accountsDB
	// pkgSeq: when a package last changed in this run; reloadSeq: when
	// the init system last read its unit files again (see reloadIfChanged).
	pkgSeq, reloadSeq int
	// workers: one per goroutine observing paths; the first also
	// serves the change phase's own looks.
	workers workers
	// known: last run's fingerprints, for the first look only.
	known *knownFiles
	// readBackAt: when the read-back began.
	readBackAt time.Time
	// staged: BeforeStaging has run, with this result.
	staged    bool
	stagedErr error
}

// staging runs System.BeforeStaging the first time the run is about to
// create a temp file beside a declared path.
func (r *run) staging() error {
	if !r.staged {
		r.staged = true
		if r.s.BeforeStaging != nil {
			r.stagedErr = r.s.BeforeStaging()
		}
	}
	return r.stagedErr
}

// Apply reconciles specs and reads every one of them back, returning one
// Result per spec in the order given. See the package doc for the order of
// work and the rules.
func (s *System) Apply(ctx context.Context, specs []Spec) []Result {
	r := s.newRun(ctx, specs)
	defer r.close()
	if s.DryRun {
		r.observeBefore()
		return r.dryResults()
	}
	r.change()
	if s.beforeReadBack != nil {
		s.beforeReadBack()
	}
	r.readBack()
	// A path's line costs a digest; they are made in parallel. The
	// others may ask their backends, one at a time.
	out := make([]Result, len(r.items))
	spread(len(r.items), 256, 64, func(_, i int) {
		if it := r.items[i]; isPath(it.spec.Kind) {
			out[i] = r.result(it)
		}
	})
	for i, it := range r.items {
		if !isPath(it.spec.Kind) {
			out[i] = r.result(it)
		}
	}
	s.last, s.fingerprints, s.fingerprinted = r, nil, false
	return out
}

func (s *System) newRun(ctx context.Context, specs []Spec) *run {
	r := &run{
		s:       s,
		ctx:     ctx,
		items:   make([]*item, len(specs)),
		live:    s.Root != "" && filepath.Clean(s.Root) == "/",
		links:   map[string]string{},
		changed: map[string]int{},
		invalid: map[string]bool{},
	}
	if !s.DryRun && len(s.Known) > 0 {
		r.known = &knownFiles{list: s.Known}
	}
	r.ids = newIDs(s.Root, r.live)
	accounts := declaredAccounts(specs)
	all := make([]item, len(specs))
	for i := range specs {
		it := &all[i]
		*it = item{spec: &specs[i], mode: -1, uid: -1, gid: -1}
		r.items[i] = it
		it.order = specs[i].Order
		if it.order == 0 {
			it.order = DefaultOrder(specs[i].Kind)
		}
		it.err = it.resolve(r.ids, accounts, !s.Checked)
	}
	// Both lines of a clash fail: neither can be applied alone.
	var clashes []Clash
	if !s.Checked {
		clashes = Clashes(specs)
	}
	for _, c := range clashes {
		a, b := r.items[c.First], r.items[c.Second]
		err := errors.New(ClashReason(a.spec, b.spec))
		if a.err == nil {
			a.err = err
		}
		if b.err == nil {
			b.err = err
		}
	}
	for _, it := range r.items {
		if it.err == nil && it.spec.Kind == Symlink && !it.absent {
			r.links[it.spec.Path] = it.spec.Target
		}
	}
	if s.Root == "" {
		r.rootErr = errors.New("no root directory given")
	} else if r.t, r.rootErr = openTree(s.Root, r.links); r.rootErr != nil {
		r.t = nil
	}
	if r.t == nil {
		r.failPaths(r.rootErr)
	}
	return r
}

func (r *run) failPaths(err error) {
	for _, it := range r.items {
		if isPath(it.spec.Kind) && it.err == nil {
			it.err = err
		}
	}
}

func (r *run) close() {
	if r.t != nil {
		r.t.close()
	}
}

func isPath(k Kind) bool { return k == File || k == Directory || k == Symlink }

// resolve checks a spec (Check), unless check is false, and resolves
// what it declares. accounts holds the users and groups the run makes
// (nil: none).
func (it *item) resolve(ids *ids, accounts accountIDs, check bool) error {
	s := it.spec
	if check {
		if bad := Check(s); len(bad) > 0 {
			return bad[0]
		}
	}
	it.absent = s.State == "absent" || (s.Kind == Package && s.Version == "absent")
	if !isPath(s.Kind) {
		return nil
	}
	it.parent, it.base = split(s.Path)
	if it.absent {
		return nil
	}
	if s.Kind == File {
		var err error
		if it.content, err = s.Bytes(); err != nil {
			return err
		}
	}
	if s.Mode != "" {
		m, err := parseMode(s.Mode)
		if err != nil {
			return err
		}
		it.mode = int(m)
	}
	for _, o := range []struct {
		db, what, name string
		id             *int
	}{{"passwd", "owner", s.Owner, &it.uid}, {"group", "group", s.Group, &it.gid}} {
		if o.name == "" {
			continue
		}
		id, err := ids.lookup(o.db, o.what, o.name)
		order, made := accounts[idKey{o.db, o.name}]
		if err == nil {
			*o.id = id
			// An account this run changes may change its id: looked
			// up again once it has been changed.
			it.resettle = it.resettle || (made && order <= it.order)
			continue
		}
		kind := User
		if o.db == "group" {
			kind = Group
		}
		switch {
		case !made:
			return fmt.Errorf("%w; no %s resource of this declaration makes it, and muster never puts another owner in its place", err, kind)
		case order > it.order:
			return fmt.Errorf("%s %q does not exist yet: this declaration makes it at order %d, after this %s's order %d; give the %s a lower order", o.what, o.name, order, it.spec.Kind, it.order, kind)
		}
		it.pendingOwner = true
	}
	return nil
}

// change runs the change phase, group by group.
func (r *run) change() {
	sorted := slices.Clone(r.items)
	slices.SortStableFunc(sorted, func(a, b *item) int {
		if c := cmp.Compare(a.order, b.order); c != 0 {
			return c
		}
		if c := cmp.Compare(kindRank(a.spec.Kind), kindRank(b.spec.Kind)); c != 0 {
			return c
		}
		if a.spec.Kind == User || a.spec.Kind == Group {
			// Groups before the users in them; to remove, the users
			// first, since a group cannot go while it is a user's
			// primary group.
			return cmp.Compare(accountRank(a), accountRank(b))
		}
		if !isPath(a.spec.Kind) {
			return 0
		}
		// Present before absent; present shallow first, absent deep
		// first.
		if a.absent != b.absent {
			if a.absent {
				return 1
			}
			return -1
		}
		da, db := strings.Count(a.spec.Path, "/"), strings.Count(b.spec.Path, "/")
		if a.absent {
			return cmp.Compare(db, da)
		}
		return cmp.Compare(da, db)
	})
	if r.s.SweepTemps {
		r.sweepTemps()
	}
	r.observeBefore()
	for len(sorted) > 0 {
		n := 1
		for n < len(sorted) && sorted[n].order == sorted[0].order {
			n++
		}
		group := sorted[:n]
		sorted = sorted[n:]
		var pkgs, accts, paths, svcs []*item
		for _, it := range group {
			switch {
			case it.err != nil:
			case it.spec.Kind == Package:
				pkgs = append(pkgs, it)
			case it.spec.Kind == User || it.spec.Kind == Group:
				accts = append(accts, it)
			case it.spec.Kind == Service:
				svcs = append(svcs, it)
			default:
				paths = append(paths, it)
			}
		}
		r.changePackages(pkgs)
		r.changeAccounts(accts)
		r.changePaths(paths)
		r.changeServices(svcs)
	}
	r.purge()
	r.restarts()
}

func kindRank(k Kind) int {
	switch k {
	case Package:
		return 0
	case User, Group:
		return 1
	case Service:
		return 3
	}
	return 2
}

// accountRank orders accounts: present groups, present users, absent
// users, absent groups.
func accountRank(it *item) int {
	switch {
	case !it.absent && it.spec.Kind == Group:
		return 0
	case !it.absent:
		return 1
	case it.spec.Kind == User:
		return 2
	}
	return 3
}

// interrupted reports, for a line about to change, that the run was
// cancelled: nothing more is changed, but everything is still read back.
func (r *run) interrupted(it *item) bool {
	if err := r.ctx.Err(); err != nil {
		it.set().fatal = fmt.Errorf("not applied: %w", err)
		return true
	}
	return false
}

// observeBefore observes every path spec, in parallel.
func (r *run) observeBefore() {
	r.observePaths(r.t, r.known)
	if r.s.DryRun {
		r.observePurges()
		r.observePackages()
		r.observeAccounts()
		r.observeServices()
	}
}

// observePaths observes every path spec, in parallel. Fingerprints in
// known spare reading the files they vouch for; nil reads every file.
func (r *run) observePaths(t *tree, known *knownFiles) {
	if t == nil {
		return
	}
	// Directories are resolved here, one goroutine; files are read in
	// parallel on the handles found.
	var todo []*item
	var vouch []*Fingerprint // beside todo, when there are fingerprints
	for _, it := range r.items {
		if it.err != nil || it.leave || !isPath(it.spec.Kind) {
			continue
		}
		o := &it.obs
		*o = observed{gen: r.gen}
		d, err := t.dir(it.parent, false)
		switch {
		case errors.Is(err, errParentMissing):
		case err != nil:
			o.err = err
		default:
			it.dir = d
			todo = append(todo, it)
			if known != nil {
				var fp *Fingerprint
				if it.spec.Kind == File {
					fp = known.find(it.spec.Path)
				}
				vouch = append(vouch, fp)
			}
		}
	}
	r.workers.get(runtime.GOMAXPROCS(0) - 1)
	spread(len(todo), 64, 16, func(g, i int) {
		it := todo[i]
		var fp *Fingerprint
		if vouch != nil {
			fp = vouch[i]
		}
		it.obs.st, it.obs.err = observePath(r.workers[g], it.dir, it.base, it.spec.Kind, it.content, fp)
	})
}

// readBack observes every spec again, through a fresh tree so that nothing
// cached during the change phase can vouch for it.
func (r *run) readBack() {
	r.readBackAt = r.s.clock()
	if r.t != nil {
		r.t.close()
		t, err := openTree(r.s.Root, r.links)
		if err != nil {
			r.t = nil
			for _, it := range r.items {
				if isPath(it.spec.Kind) && it.err == nil {
					it.obs = observed{err: err}
				}
			}
		} else {
			r.t = t
		}
	}
	r.observePaths(r.t, nil)
	r.observePurges()
	r.observePackages()
	r.observeAccounts()
	r.observeServices()
	r.correctLooks()
}

// result turns an item's read-back into its line. This is the only place a
// line becomes ok, changed or removed, and only when mismatch found nothing.
func (r *run) result(it *item) Result {
	res := Result{ID: it.spec.ID(), Status: outcome.Failed}
	switch {
	case it.err != nil:
		res.Detail = it.err.Error()
		return res
	case it.get().fatal != nil:
		res.Detail = it.get().fatal.Error()
		return res
	case it.pendingOwner:
		// settleOwner runs before every path is changed; a path it
		// did not reach cannot vouch for its owner.
		res.Detail = fmt.Sprintf("owner %q or group %q was never resolved", it.spec.Owner, it.spec.Group)
		return res
	case it.leave:
		res.Status, res.Detail = outcome.OK, it.get().note
		return res
	case it.kept:
		res.Status, res.Detail = outcome.Warn, it.get().note
		return res
	case it.obs.err != nil:
		res.Detail = "read back: " + it.obs.err.Error()
		return res
	}
	if diffs := r.mismatch(it, &it.obs.st); len(diffs) > 0 {
		res.Detail = "read back: " + strings.Join(diffs, "; ")
		if it.get().explain != nil {
			res.Detail = it.get().explain.Error() + " (" + res.Detail + ")"
		}
		return res
	}
	res.Status = outcome.OK
	it.verified = true
	if it.spec.Kind == Package && it.created && wantVersion(it) == "" {
		// Installed at the repository's version: the read-back names it.
		it.set().what = []string{"installed " + it.obs.st.Version}
	}
	switch {
	case it.removed:
		res.Status = outcome.Removed
	case it.changed:
		res.Status = outcome.Changed
	}
	res.Detail = detail(it.get().what, it.get().note)
	res.Digest = stateDigest(it.spec, &it.obs.st)
	res.Created = it.created
	return res
}

func detail(what []string, note string) string {
	d := strings.Join(what, ", ")
	if note != "" {
		if d != "" {
			d += "; "
		}
		d += note
	}
	return d
}

// mismatch lists how st differs from the spec; empty means it matches.
func (r *run) mismatch(it *item, st *State) []string {
	switch it.spec.Kind {
	case Package:
		return packageMismatch(it, st)
	case Service:
		return r.serviceMismatch(it, st)
	case User, Group:
		return accountMismatch(it, st, r.db)
	}
	return append(pathMismatch(it, st), purgeMismatch(it)...)
}

// dryResults reports what Apply would do, from the observations alone.
func (r *run) dryResults() []Result {
	restart := map[string]bool{}
	out := make([]Result, len(r.items))
	for i, it := range r.items {
		res := Result{ID: it.spec.ID(), Status: outcome.Failed}
		out[i] = res
		switch {
		case it.err != nil:
			out[i].Detail = it.err.Error()
			continue
		case it.obs.err != nil:
			var pending *linkPendingError
			if errors.As(it.obs.err, &pending) {
				out[i].Status = outcome.Changed
				out[i].Detail = fmt.Sprintf("would change once symlink %s points to %q", pending.path, pending.want)
				restart[it.spec.Path] = true
				continue
			}
			if it.spec.Kind == Service {
				if pkg, sure, ok := r.unitFromPackage(it); ok {
					out[i] = r.serviceFromPackageResult(it, pkg, sure)
					continue
				}
			}
			out[i].Detail = it.obs.err.Error()
			continue
		}
		if it.spec.Kind == Service {
			continue // after the paths, for restarts
		}
		diffs := r.mismatch(it, &it.obs.st)
		if len(diffs) == 0 && !it.pendingOwner {
			out[i].Status = outcome.OK
			out[i].Digest = stateDigest(it.spec, &it.obs.st)
			continue
		}
		what, removes, err := r.dryPlan(it)
		if err != nil {
			out[i].Detail = err.Error()
			continue
		}
		if it.pendingOwner {
			what = append(what, pendingOwnerPlan(it.spec))
		}
		out[i].Status = outcome.Changed
		if removes {
			out[i].Status = outcome.Removed
		}
		out[i].Detail = would(what)
		if isPath(it.spec.Kind) {
			restart[it.spec.Path] = true
		}
	}
	for i, it := range r.items {
		if it.err != nil || it.obs.err != nil || it.spec.Kind != Service {
			continue
		}
		what := serviceDryPlan(it, r.s.Services)
		var files []string
		for _, p := range it.spec.RestartOn {
			if restart[p] {
				files = append(files, p)
			}
		}
		if len(files) > 0 {
			what = append(what, "restart ("+strings.Join(files, ", ")+" would change)")
		}
		diffs := r.mismatch(it, &it.obs.st)
		switch {
		case len(what) > 0:
			out[i].Status = outcome.Changed
			out[i].Detail = would(what)
		case len(diffs) > 0:
			out[i].Detail = strings.Join(diffs, "; ")
		default:
			out[i].Status = outcome.OK
			out[i].Detail = it.get().note
			out[i].Digest = stateDigest(it.spec, &it.obs.st)
		}
	}
	return out
}

// would phrases a plan for a dry run: verbs as they are ("would create"),
// and attributes as changes ("would change mode 0600 → 0644").
func would(what []string) string {
	out := make([]string, len(what))
	change := true
	for i, w := range what {
		verb, _, _ := strings.Cut(w, " ")
		switch verb {
		case "content", "mode", "owner", "group", "target", "version", "uid", "gid", "primary", "groups", "home", "shell":
			if change {
				w = "change " + w
				change = false
			}
		}
		out[i] = w
	}
	return "would " + strings.Join(out, ", ")
}

func (r *run) dryPlan(it *item) ([]string, bool, error) {
	switch it.spec.Kind {
	case Package:
		return r.packageDryPlan(it)
	case User, Group:
		what, removes := r.accountDryPlan(it)
		return what, removes, nil
	}
	st := &it.obs.st
	p, err := planPath(it, st, r.s.Owns)
	if err != nil {
		return nil, false, err
	}
	if len(it.get().purgeLeft) > 0 {
		p.what = append(p.what, purgeWhat("purge", it.get().purgeLeft))
	}
	if p.remove && it.spec.Kind == Directory {
		if d, err := r.t.dir(it.parent, false); err == nil {
			if empty, err := dirEmpty(d, it.base); err == nil && !empty {
				return nil, false, fmt.Errorf("directory %s is not empty; muster removes only empty directories", it.spec.Path)
			}
		}
	}
	return p.what, p.remove, nil
}

// RemoveAll deletes orphans, resources the host owns that no declaration
// names any more, and reads back that each is gone: files and symlinks, and
// directories only when empty (deepest first, so a directory emptied by the
// same call goes too). Packages are removed only with System.Prune; services
// are left as they are. A directory that is not empty is left in place
// and its line warns (status outcome.Warn): what is in it is not muster's
// to remove. An orphan that is no longer the kind muster created (a
// directory where its file was) is left in place and its line fails.
// Parent symlinks are never followed here: no declaration vouches for them.
func (s *System) RemoveAll(ctx context.Context, specs []Spec) []Result {
	r := s.newRun(ctx, nil)
	defer r.close()
	r.items = make([]*item, len(specs))
	var paths, pkgs []*item
	for i := range specs {
		it := &item{spec: &specs[i], mode: -1, uid: -1, gid: -1, absent: true}
		r.items[i] = it
		switch sp := it.spec; sp.Kind {
		case File, Directory, Symlink:
			if it.err = checkPath(sp.Path); it.err == nil {
				it.parent, it.base = split(sp.Path)
				paths = append(paths, it)
			}
		case Package:
			if it.err = it.resolve(nil, nil, true); it.err == nil {
				it.absent = true
				pkgs = append(pkgs, it)
			}
		case Service:
			it.leave = true
			it.set().note = "left as it is: muster does not remove units"
		case User, Group:
			it.leave = true
			it.set().note = fmt.Sprintf("left as it is: muster removes a %s only when it is declared absent", sp.Kind)
		default:
			it.err = fmt.Errorf("unknown resource type %q", sp.Kind)
		}
	}
	if r.t == nil {
		r.failPaths(r.rootErr)
	}
	slices.SortStableFunc(paths, func(a, b *item) int {
		return cmp.Compare(strings.Count(b.spec.Path, "/"), strings.Count(a.spec.Path, "/"))
	})
	r.observePaths(r.t, nil)
	out := make([]Result, len(specs))
	if s.DryRun {
		for i, it := range r.items {
			out[i] = r.dryOrphan(it)
		}
		return out
	}
	r.removePaths(paths)
	r.prunePackages(pkgs)
	r.readBack()
	for i, it := range r.items {
		out[i] = r.result(it)
	}
	return out
}

// Remove deletes one orphan; see RemoveAll.
func (s *System) Remove(ctx context.Context, spec Spec) Result {
	return s.RemoveAll(ctx, []Spec{spec})[0]
}

func (r *run) dryOrphan(it *item) Result {
	res := Result{ID: it.spec.ID(), Status: outcome.Failed}
	switch {
	case it.err != nil:
		res.Detail = it.err.Error()
	case it.spec.Kind == Service || it.spec.Kind == User || it.spec.Kind == Group:
		res.Status, res.Detail = outcome.OK, it.get().note
	case it.spec.Kind == Package && !r.s.Prune:
		res.Status, res.Detail = outcome.OK, pruneNote
	case it.spec.Kind == Package:
		res.Status, res.Detail = outcome.Removed, "would remove if installed"
	case it.obs.err != nil:
		res.Detail = it.obs.err.Error()
	case !it.obs.st.Exists:
		res.Status, res.Detail = outcome.OK, "already absent"
	default:
		if err := orphanCheck(it, &it.obs.st); err != nil {
			res.Detail = err.Error()
			break
		}
		res.Status, res.Detail = outcome.Removed, "would remove"
	}
	return res
}

func (s *System) clock() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}
