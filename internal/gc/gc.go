// Package gc owns the rules by which objects leave the spool. Objects are
// write-once and removed by nothing else, so each rule here names exactly
// which objects no reader can need any more:
//
//   - temp files (directory spools) older than an hour: what an
//     interrupted write left; no write takes that long, and a temp file
//     left after its object was linked shares the object's bytes, so
//     removing it never damages an object;
//   - declaration bundles and manifests of a declare run that lost the race
//     for its generation (decl/<gen>/<run>/... and manifest/<gen>/<run>
//     where commit/<gen> names another run), older than an hour: no commit
//     will ever name them, so no host reads them;
//   - with Keep, declaration bundles of generations older than the Keep
//     newest committed ones, never of the newest, and never of a
//     generation a node has not moved past (it may still need its
//     declaration; see MovedPast), unless that node's identity is
//     Retired. Commits stay: they are small and keep
//     generation numbers from being used twice; manifests stay for
//     report's history;
//   - with Revoked, the reports and briefings of revoked identities: they
//     are refused for good and no reader counts them, except the report
//     that carries its node's newest recovery copy, which a host
//     re-joining under the name still needs;
//   - with DecidedJoins, the join requests the mesh has decided: the
//     admission or refusal that decided one stays for good and is all a
//     reader looks at (admit lists requests only to find undecided ones,
//     and a host looks for its request only when no decision names it).
//     On a directory spool the token's directory goes too once it is
//     empty, so readers that list directories no longer visit it;
//   - with SupersededReports, older reports of a host's generation that a
//     newer one of the same generation replaces in every answer report
//     gives (fleet.State.SupersededReports says which): most of a fleet's
//     reports are the runs a timer makes on the generation it is on;
//   - with SupersededBriefings, briefings older than their node's newest,
//     when that one verified (enrol.Registry.SupersededBriefings): only a
//     node's newest briefing that verifies is read.
//
// Other reports, briefings and enrolment records stay.
//
// A commit that cannot be read and verified against the mesh's key keeps
// every object of its generation: gc removes nothing on doubt.
package gc

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/muster-tool/muster/internal/enrol"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/internal/mesh"
	"github.com/muster-tool/muster/internal/workpool"
	"github.com/muster-tool/muster/spool"
)

// MinAge is how old a temp file or a lost run's object must be before gc
// removes it.
const MinAge = time.Hour

// Rules, as they appear in a Removal.
const (
	RuleTemp       = "temp-file"
	RuleLostRun    = "lost-run"
	RuleSuperseded = "superseded"
	RuleRevoked    = "revoked"
	RuleDecided    = "decided-join"
	RuleReport     = "superseded-report"
	RuleBriefing   = "superseded-briefing"
)

// Options says what gc may remove.
type Options struct {
	// DryRun finds what would be removed and removes nothing.
	DryRun bool
	// Now is the time ages are measured against (default time.Now()).
	Now time.Time
	// MinAge overrides MinAge, for tests.
	MinAge time.Duration
	// MeshKey is the mesh's signing key, against which commits are
	// verified. If nil, the key the spool's mesh/keys object publishes
	// (and is signed with) is used.
	MeshKey ed25519.PublicKey
	// Keep, if above 0, turns on the superseded rule: keep the Keep
	// newest committed generations.
	Keep int
	// Assigned tells the superseded rule which nodes each generation
	// assigned a declaration bundle (see MovedPast). Required with Keep.
	Assigned Assigned
	// Retired, if set, says which node identities will never fetch a
	// bundle again (revoked ones): they keep no generation, neither as
	// Assigned names them nor as Memo remembers them.
	Retired func(nodeID string) bool
	// Memo, if set, is the file in the mesh's cache directory where the
	// superseded rule keeps, from one run to the next, what it learned of
	// the generations a node still needs (see Pending), so that they cost
	// only the manifests declared since. It can be removed at any time.
	Memo string
	// Revoked, if not nil, turns on the revoked rule: the identities the
	// mesh no longer trusts, by node id. Only the mesh can tell, as
	// revocations are sealed to it.
	Revoked map[string]Revoked
	// DecidedJoins, if not nil, turns on the decided-join rule: it says
	// how the join request host hostFP made with token tokenID was
	// decided, or false while the request is pending. Only the mesh can
	// tell, as decisions are sealed to it.
	DecidedJoins func(tokenID, hostFP string) (detail string, decided bool)
	// SupersededReports and SupersededBriefings turn on the
	// superseded-report and superseded-briefing rules for these objects.
	// Only the mesh can tell which they are, as reports and briefings are
	// sealed to it.
	// Each names the object no reader needs any more and the newer one
	// read in its place.
	SupersededReports, SupersededBriefings []enrol.Superseded
}

// Revoked is an identity the mesh no longer trusts, for the revoked rule.
type Revoked struct {
	Name      string // its node's name
	RevokedAt time.Time
	Reason    string
	// Keep names the one report of the identity that stays, because it
	// carries its node's newest recovery copy (see fleet.RecoveryCopies);
	// empty when no report of it does.
	Keep string
	// Objects are the identity's reports and briefings, as the mesh's
	// reading of the spool just found them: gc lists nothing more for
	// them, where each revoked identity ever cost two listings a run.
	Objects []string
}

// Removal is one object (or temp file) gc removed or, in a dry run, would
// remove.
type Removal struct {
	Object string `json:"object"` // object name, or temp file name for RuleTemp
	Rule   string `json:"rule"`
	Detail string `json:"detail"`
}

// Result is what one gc did.
type Result struct {
	Removed []Removal
	// Notes say what gc left alone on doubt, such as a commit it could
	// not verify.
	Notes []string
}

// Run applies the rules to sp and removes what they select (unless
// DryRun). It stops at the first error, returning what it removed so far.
func Run(ctx context.Context, sp spool.Spool, opts Options) (Result, error) {
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	if opts.MinAge <= 0 {
		opts.MinAge = MinAge
	}
	if opts.Keep < 0 {
		return Result{}, fault.Usagef("keep %d: want at least 1", opts.Keep)
	}
	if opts.Keep > 0 && opts.Assigned == nil {
		return Result{}, errors.New("gc: the superseded rule needs to know which nodes each generation assigned")
	}
	var res Result
	if d, ok := sp.(*spool.Dir); ok {
		if err := removeTemps(ctx, d, opts, &res); err != nil {
			return res, err
		}
	}
	commits, err := readCommits(ctx, sp, opts.MeshKey, &res)
	if err != nil {
		return res, err
	}
	held, err := HeldGenerations(ctx, sp)
	if err != nil {
		return res, err
	}
	lost, emptied, err := LostRuns(ctx, sp, commits, held, opts.Now, opts.MinAge)
	if err != nil {
		return res, err
	}
	var sup []Removal
	if opts.Keep > 0 {
		var dirs []string
		if sup, dirs, err = superseded(ctx, sp, commits, held, opts, &res); err != nil {
			return res, err
		}
		emptied = append(emptied, dirs...)
	}
	rev := RevokedObjects(opts.Revoked)
	var joins []Removal
	if opts.DecidedJoins != nil {
		var tokens []string
		if joins, tokens, err = DecidedJoins(ctx, sp, opts.DecidedJoins); err != nil {
			return res, err
		}
		emptied = append(emptied, tokens...)
	}
	var replaced []Removal
	for _, r := range opts.SupersededReports {
		replaced = append(replaced, Removal{Object: r.Object, Rule: RuleReport,
			Detail: fmt.Sprintf("%s, a newer run of the same generation, is the one counted", r.By)})
	}
	for _, b := range opts.SupersededBriefings {
		replaced = append(replaced, Removal{Object: b.Object, Rule: RuleBriefing,
			Detail: fmt.Sprintf("%s, the node's newest, verified and is the one read", b.By)})
	}
	all := slices.Concat(lost, sup, rev, joins, replaced)
	if opts.DryRun {
		res.Removed = append(res.Removed, all...)
		return res, nil
	}
	// A first gc of a large fleet removes a hundred thousand objects, and
	// a daily one the runs a fleet reported that day.
	names := make([]string, len(all))
	for i, r := range all {
		names[i] = r.Object
	}
	done, err := spool.DeleteMany(ctx, sp, names)
	for i, r := range all {
		if done[i] {
			res.Removed = append(res.Removed, r)
		}
	}
	if err != nil {
		return res, err
	}
	if d, ok := sp.(*spool.Dir); ok {
		for _, dir := range emptied {
			if err := d.RemoveEmptyDir(ctx, dir); err != nil {
				return res, err
			}
		}
	}
	return res, nil
}

// DecidedJoins selects the join requests (enrol/join/<token id>/<host>)
// that decided says are decided. It also returns the directories of the
// tokens whose every request it selected.
func DecidedJoins(ctx context.Context, sp spool.Spool, decided func(tokenID, hostFP string) (string, bool)) ([]Removal, []string, error) {
	var out []Removal
	var emptied []string
	dir, all := "", true
	flush := func() {
		if dir != "" && all {
			emptied = append(emptied, dir)
		}
	}
	err := sp.List(ctx, spool.EnrolJoinPrefix, func(i spool.Info) error {
		tid, fp, ok := strings.Cut(strings.TrimPrefix(i.Name, spool.EnrolJoinPrefix), "/")
		if !ok || tid == "" || fp == "" || strings.Contains(fp, "/") {
			return nil // not a join request: spool verify reports it
		}
		if d := spool.EnrolJoinPrefix + tid + "/"; d != dir {
			flush()
			dir, all = d, true
		}
		detail, ok := decided(tid, fp)
		if !ok {
			all = false
			return nil
		}
		out = append(out, Removal{Object: i.Name, Rule: RuleDecided, Detail: detail})
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	flush()
	return out, emptied, nil
}

func removeTemps(ctx context.Context, d *spool.Dir, opts Options, res *Result) error {
	return d.Temps(ctx, func(path string, age time.Duration) error {
		if age < opts.MinAge {
			return nil // a write in progress
		}
		if !opts.DryRun {
			if err := d.RemoveTemp(path); err != nil {
				return err
			}
		}
		res.Removed = append(res.Removed, Removal{Object: filepath.Base(path), Rule: RuleTemp,
			Detail: fmt.Sprintf("temp file left by a write interrupted %s ago", age.Round(time.Minute))})
		return nil
	})
}

// readCommits reads every commit and returns the run each names, keyed by
// generation. A commit that cannot be verified is left out with a note, so
// nothing of its generation is removed.
func readCommits(ctx context.Context, sp spool.Spool, key ed25519.PublicKey, res *Result) (map[uint64]string, error) {
	gens, err := generation.Committed(ctx, sp)
	if err != nil {
		return nil, err
	}
	runs := map[uint64]string{}
	if len(gens) == 0 {
		return runs, nil
	}
	if key == nil {
		if key, err = publishedKey(ctx, sp); err != nil {
			res.Notes = append(res.Notes, fmt.Sprintf("kept every declaration: %v", err))
			return runs, nil
		}
	}
	// One commit a generation, each a round trip to an object store:
	// after years of daily declares, a thousand of them. They are read
	// several at once.
	won := make([]string, len(gens))
	refused := make([]error, len(gens))
	err = workpool.Run(ctx, len(gens), perGeneration, func(i int) error {
		c, err := generation.ReadCommit(ctx, sp, gens[i], key)
		if errors.Is(err, spool.ErrUnavailable) {
			return err
		}
		if err != nil {
			refused[i] = err
			return nil
		}
		won[i] = c.Run
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i, g := range gens {
		if refused[i] != nil {
			res.Notes = append(res.Notes, fmt.Sprintf("kept generation %d: %v", g, refused[i]))
			continue
		}
		runs[g] = won[i]
	}
	return runs, nil
}

// perGeneration is how many generations gc reads at once (their commits,
// their runs).
var perGeneration = 16

// publishedKey returns the key that signs the spool's mesh/keys object:
// the mesh's signing key, since only it can sign that object.
func publishedKey(ctx context.Context, sp spool.Spool) (ed25519.PublicKey, error) {
	data, err := sp.Get(ctx, spool.MeshKeysName, 1<<16)
	if err != nil {
		return nil, fmt.Errorf("read the mesh's public keys: %w", err)
	}
	return mesh.PublishedSigner(data)
}

// HeldGenerations returns the generations that have a directory below
// decl/: one listing of directories (on S3 one request per 1,000
// generations). On a directory spool a directory may be left empty.
func HeldGenerations(ctx context.Context, sp spool.Spool) (map[uint64]bool, error) {
	dirs, err := spool.Subdirs(ctx, sp, spool.DeclPrefix)
	if err != nil {
		return nil, err
	}
	held := make(map[uint64]bool, len(dirs))
	for _, d := range dirs {
		if g, err := spool.ParseGeneration(strings.TrimSuffix(strings.TrimPrefix(d, spool.DeclPrefix), "/")); err == nil {
			held[g] = true
		}
	}
	return held, nil
}

// LostRuns selects the decl/ and manifest/ objects of declare runs that
// lost the race for their generation: commits maps each committed
// generation to the run its commit names, and held says which generations
// still have bundles (HeldGenerations). Objects younger than minAge are
// kept, and so are objects whose age the spool cannot tell. It also
// returns the bundle directories of the lost runs whose every bundle it
// selected, which a directory spool removes once they are empty.
func LostRuns(ctx context.Context, sp spool.Spool, commits map[uint64]string, held map[uint64]bool, now time.Time, minAge time.Duration) (removals []Removal, emptied []string, err error) {
	// The listing dates each object (S3's LastModified, a file's time):
	// no request per object to ask its age.
	lost := func(i spool.Info, g uint64, run string) (Removal, bool) {
		won := commits[g]
		if run == won || i.ModTime.IsZero() || now.Sub(i.ModTime) < minAge {
			return Removal{}, false
		}
		return Removal{Object: i.Name, Rule: RuleLostRun,
			Detail: fmt.Sprintf("declare run %s lost generation %d to run %s", run, g, won)}, true
	}
	// A manifest is manifest/<gen>/<run>, one a run, and stays when its
	// generation's bundles go: one listing of them all, one request per
	// 1,000 runs, not one a generation.
	manifests := map[uint64][]Removal{}
	err = sp.List(ctx, spool.ManifestPrefix, func(i spool.Info) error {
		g, run, err := spool.ParseManifestName(i.Name)
		if _, committed := commits[g]; err != nil || !committed {
			return nil // not a manifest (spool verify says so), or not decided
		}
		if r, ok := lost(i, g, run); ok {
			manifests[g] = append(manifests[g], r)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	// A run's bundles are decl/<gen>/<run>/<node>: a generation's runs
	// are named by a listing of directories, and only a lost run's
	// bundles are listed, not the winner's, one a node. A listing is a
	// round trip to an object store: several generations at once.
	gens := slices.DeleteFunc(sortedGens(commits), func(g uint64) bool { return !held[g] })
	bundles := make([][]Removal, len(gens))
	dirs := make([][]string, len(gens))
	err = workpool.Run(ctx, len(gens), perGeneration, func(k int) error {
		g := gens[k]
		prefix := spool.DeclGenPrefix(g)
		runs, err := spool.Subdirs(ctx, sp, prefix)
		if err != nil {
			return err
		}
		for _, dir := range runs {
			run := strings.TrimSuffix(strings.TrimPrefix(dir, prefix), "/")
			if run == commits[g] {
				continue
			}
			kept := false
			err := sp.List(ctx, dir, func(i spool.Info) error {
				r, ok := lost(i, g, run)
				if ok {
					bundles[k] = append(bundles[k], r)
				}
				kept = kept || !ok
				return nil
			})
			if err != nil {
				return err
			}
			if !kept {
				dirs[k] = append(dirs[k], dir)
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	// A generation's manifests, then its bundles, generation by
	// generation.
	var out []Removal
	k := 0
	for _, g := range sortedGens(commits) {
		out = append(out, manifests[g]...)
		if k < len(gens) && gens[k] == g {
			out = append(out, bundles[k]...)
			emptied = append(emptied, dirs[k]...)
			k++
		}
	}
	return out, emptied, nil
}

// Assigned returns the node ids generation gen's manifest assigned a
// declaration bundle (run is the run gen's commit names). ok is false when
// the manifest cannot be read, which keeps gen's bundles and counts for
// none of the generations before it; the caller says why. An error stops
// gc.
type Assigned func(ctx context.Context, gen uint64, run string) (nodeIDs []string, ok bool, err error)

// Superseded selects the declaration bundles (decl/) of the committed
// generations (commits: the run each names) older than the keep newest
// that every node they were assigned to has moved past (see MovedPast).
// held says which generations still have bundles (HeldGenerations). The
// newest committed generation is never selected, whatever keep is.
// Commits and manifests stay: they are small, and report needs them to
// tell a generation's history.
//
// Only generations that still hold bundles are looked at, so a daily gc
// reads the manifests of the generation that has just grown old and of the
// one after it, not of every generation ever declared. It also returns the
// directories of a directory spool that the selection empties, deepest
// first, for gc to remove.
func Superseded(ctx context.Context, sp spool.Spool, commits map[uint64]string, held map[uint64]bool, keep int, assigned Assigned, known map[uint64]Pending) (removals []Removal, emptied []string, pending map[uint64]Pending, err error) {
	gens := sortedGens(commits)
	keep = max(keep, 1)
	if len(gens) <= keep {
		return nil, nil, nil, nil
	}
	// The candidates: old generations whose winning run still holds a
	// bundle (a lost run's are the lost-run rule's). Only the first is
	// asked for: a generation a node still needs is kept on every gc, and
	// its bundles, one a node, are listed only once it goes.
	var candidates []uint64
	for _, g := range gens[:len(gens)-keep] {
		if !held[g] {
			continue
		}
		err := sp.List(ctx, spool.DeclRunPrefix(g, commits[g]), func(spool.Info) error { return errFound })
		switch {
		case errors.Is(err, errFound):
			candidates = append(candidates, g)
		case err != nil:
			return nil, nil, nil, err
		}
	}
	moved, pending, err := MovedPast(ctx, commits, candidates, assigned, known)
	if err != nil {
		return nil, nil, nil, err
	}
	for _, g := range slices.Backward(candidates) {
		if !moved[g] {
			continue
		}
		err := sp.List(ctx, spool.DeclRunPrefix(g, commits[g]), func(i spool.Info) error {
			removals = append(removals, Removal{Object: i.Name, Rule: RuleSuperseded,
				Detail: fmt.Sprintf("generation %d is older than the %d newest committed, and every node has moved past it", g, keep)})
			return nil
		})
		if err != nil {
			return nil, nil, nil, err
		}
		emptied = append(emptied, spool.DeclRunPrefix(g, commits[g]), spool.DeclGenPrefix(g))
	}
	return removals, emptied, pending, nil
}

// errFound stops a listing at its first object.
var errFound = errors.New("found")

// superseded is Superseded as Run calls it: with the identities opts
// retires left out of what each manifest assigned and of what its Memo
// remembers waiting, and the Memo read before and written after.
func superseded(ctx context.Context, sp spool.Spool, commits map[uint64]string, held map[uint64]bool, opts Options, res *Result) ([]Removal, []string, error) {
	var known map[uint64]Pending
	if opts.Memo != "" {
		var err error
		if known, err = readMemo(opts.Memo, sp.String()); err != nil {
			res.Notes = append(res.Notes, fmt.Sprintf("the generations still needed are worked out again: %v", err))
		}
	}
	assigned := opts.Assigned
	if opts.Retired != nil {
		assigned = func(ctx context.Context, gen uint64, run string) ([]string, bool, error) {
			ids, ok, err := opts.Assigned(ctx, gen, run)
			return slices.DeleteFunc(slices.Clone(ids), opts.Retired), ok, err
		}
		for g, p := range known {
			p.Waiting = slices.DeleteFunc(slices.Clone(p.Waiting), opts.Retired)
			known[g] = p
		}
	}
	sup, emptied, pending, err := Superseded(ctx, sp, commits, held, opts.Keep, assigned, known)
	if err != nil {
		return nil, nil, err
	}
	if opts.Memo != "" {
		if err := writeMemo(opts.Memo, sp.String(), pending); err != nil {
			res.Notes = append(res.Notes, fmt.Sprintf("what this gc learned of the generations still needed is not kept: %v", err))
		}
	}
	return sup, emptied, nil
}

// RevokedObjects selects the reports and briefings of the revoked
// identities (by node id), except the report each names to keep.
func RevokedObjects(revoked map[string]Revoked) []Removal {
	var out []Removal
	for _, id := range slices.Sorted(maps.Keys(revoked)) {
		r := revoked[id]
		for _, name := range slices.Sorted(slices.Values(r.Objects)) {
			what := "reports"
			switch {
			case name == r.Keep:
				continue
			case strings.HasPrefix(name, spool.BriefPrefix+id+"/"):
				what = "briefings"
			case !strings.HasPrefix(name, spool.ReportPrefix+id+"/"):
				continue // not the identity's: never removed by its revocation
			}
			out = append(out, Removal{Object: name, Rule: RuleRevoked,
				Detail: fmt.Sprintf("identity %s of %s was revoked at %s: %s; its %s are refused",
					id, r.Name, r.RevokedAt.UTC().Format(time.RFC3339), r.Reason, what)})
		}
	}
	return out
}

func sortedGens(m map[uint64]string) []uint64 {
	gens := make([]uint64, 0, len(m))
	for g := range m {
		gens = append(gens, g)
	}
	slices.Sort(gens)
	return gens
}
