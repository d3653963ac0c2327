package cli

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/pflag"

	"github.com/muster-tool/muster/internal/declare"
	"github.com/muster-tool/muster/internal/enrol"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/fleet"
	"github.com/muster-tool/muster/internal/gc"
	"github.com/muster-tool/muster/internal/mesh"
	"github.com/muster-tool/muster/internal/outcome"
	"github.com/muster-tool/muster/internal/spoolcheck"
	"github.com/muster-tool/muster/spool"
)

func cmdSpool() *Command {
	return &Command{
		Name:  "spool",
		Short: "copy, check and clean a spool",
		Long: `Work on the spool itself: copy objects between two spools (sneakernet,
mirrors), check that every object is whole, and remove what no reader needs.
sync and verify need no secret key; gc needs the mesh (--mesh or
MUSTER_MESH) for --keep and to remove the reports and briefings of revoked
identities, repo add signs with the mesh's key, and repo list reads the mesh
to verify the repository's index.`,
		Sub: []*Command{cmdSpoolSync(), cmdSpoolVerify(), cmdSpoolGC(), cmdSpoolRepo()},
	}
}

// spoolJSONVersion is the version of the --json output of the spool
// commands.
const spoolJSONVersion = 1

type syncJSON struct {
	Version     int               `json:"version"`
	Source      string            `json:"source"`
	Destination string            `json:"destination"`
	DryRun      bool              `json:"dry_run"`
	Copied      int               `json:"copied"`
	Skipped     int               `json:"skipped"`
	Bytes       int64             `json:"bytes"`
	Conflicts   []spool.SyncIssue `json:"conflicts"`
	Damaged     []spool.SyncIssue `json:"damaged"`
}

// spoolSyncOptions are the flags of muster spool sync.
type spoolSyncOptions struct {
	Check   bool
	DryRun  bool
	Output  output
	Workers int
}

func (o *spoolSyncOptions) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.Check, "check", false, "compare the content of objects both spools have, not only their size")
	fs.BoolVar(&o.DryRun, "dry-run", false, "read and check what would be copied, write nothing")
	o.Output.addFlags(fs, formatFlag{jsonFormat, "versioned JSON summary for machines"})
	fs.IntVar(&o.Workers, "workers", spool.DefaultSyncWorkers, "copy `N` objects at once")
}

func cmdSpoolSync() *Command {
	var o spoolSyncOptions
	return &Command{
		Name:  "sync",
		Usage: "muster spool sync SRC DST [--check] [--dry-run] [--json] [--workers N]",
		Short: "copy the objects DST lacks from SRC, never overwriting",
		Long: `Copy to spool DST every object of spool SRC that DST does not have. SRC and
DST are directories or s3:// locations, in any combination (see
muster-spool(5)). Nothing is ever overwritten or deleted, so syncing both ways
merges two copies of a spool that both grew into their union.

Objects are matched by name and size without reading them (--check compares the
content of objects on both sides); commits, manifests, mesh keys, repository
indexes and enrolment records are always compared by content, so two commits of
one generation are a conflict even at the same size. Each copied object is read
from SRC, checked to be a whole bundle by its header (a truncated copy is
reported as damaged and not copied), written to DST and read back and compared
(size and SHA-256). Temp files are never copied. Commits are copied last, so at
DST a generation never appears before its declarations.

An object present on both sides with different bytes is a conflict: it is
named on stderr and left alone, and sync exits 1. An interrupted sync leaves
only whole objects; run it again to copy the rest. An object store that does
not answer a request within its location's timeout= (default 1m, retries
included) makes sync stop with status 4.

Prints a one-line summary (a progress bar on a terminal), or with --json:
{"version": 1, "source", "destination", "dry_run", "copied", "skipped",
"bytes", "conflicts": [{"name", "detail"}], "damaged": [{"name", "detail"}]}.`,
		Examples: `# carry the mesh's spool to an air-gapped site on a USB stick, and back
muster spool sync /srv/muster/spool /media/usb/spool
muster spool sync /media/usb/spool /srv/muster/spool

# mirror a directory spool into an object store
muster spool sync /srv/muster/spool \
  's3://fleet/spool?endpoint=minio.internal:9000'`,
		Exits: []int{ExitFailure, ExitUsage, ExitTemporary},
		Flags: o.addFlags,
		Run:   func(env *Env, args []string) error { return runSpoolSync(env, o, args) },
	}
}

// runSpoolSync copies to spool DST every object of spool SRC it lacks.
func runSpoolSync(env *Env, o spoolSyncOptions, args []string) error {
	if err := needArgs(args, 2, 2, "SRC and DST spools"); err != nil {
		return err
	}
	if o.Workers < 1 {
		return fault.Usagef("--workers %d: want at least 1", o.Workers)
	}
	f, err := o.Output.chosen()
	if err != nil {
		return err
	}
	src, err := spool.Open(args[0])
	if err != nil {
		return err
	}
	dst, err := spool.Open(args[1])
	if err != nil {
		return err
	}
	if src.String() == dst.String() {
		return fault.Usagef("SRC and DST are the same spool (%s)", src)
	}
	opts := spool.SyncOptions{
		Check:     o.Check,
		DryRun:    o.DryRun,
		Workers:   o.Workers,
		MaxObject: spoolcheck.MaxObject,
		Validate:  spoolcheck.Object,
	}
	var clearBar func()
	opts.Progress, clearBar = syncProgress(env.Stdio.Err)
	res, err := spool.Sync(env.Ctx, src, dst, opts)
	clearBar()
	if perr := printSync(env, f, o.DryRun, src, dst, res); perr != nil && err == nil {
		err = perr
	}
	switch {
	case errors.Is(err, spool.ErrConflict):
		err = fault.WithHint(err, "nothing was overwritten; find out which copy is right (muster spool verify on each side), remove the wrong one, then sync again")
	case errors.Is(err, spool.ErrDamaged):
		err = fault.WithHint(err, "the damaged objects stay where they are; copy them again from where they were written, then sync again")
	}
	return err
}

// syncProgress returns the progress function for a sync, which draws a
// bar on w when w is a terminal, and the function that clears the bar.
func syncProgress(w io.Writer) (progress func(spool.SyncProgress), clear func()) {
	if !isTerminal(w) {
		return nil, func() {}
	}
	var bar *progressbar.ProgressBar
	progress = func(p spool.SyncProgress) {
		if bar == nil {
			bar = progressbar.NewOptions(p.Total,
				progressbar.OptionSetWriter(w),
				progressbar.OptionSetDescription("sync"),
				progressbar.OptionShowCount(),
				progressbar.OptionClearOnFinish(),
				progressbar.OptionThrottle(100*time.Millisecond))
		}
		bar.Set(p.Done)
	}
	return progress, func() {
		if bar != nil {
			bar.Clear()
		}
	}
}

// printSync names each conflict and damaged object on stderr and prints
// the summary, or with --json the result, on stdout.
func printSync(env *Env, f format, dryRun bool, src, dst spool.Spool, res spool.SyncResult) error {
	for _, c := range res.Conflicts {
		env.Errorf("conflict %s: %s", c.Name, c.Detail)
	}
	for _, d := range res.Damaged {
		env.Errorf("damaged %s: %s", d.Name, d.Detail)
	}
	if f == jsonFormat {
		return writeJSON(env.Stdio.Out, syncJSON{Version: spoolJSONVersion, Source: src.String(), Destination: dst.String(), DryRun: dryRun,
			Copied: res.Copied, Skipped: res.Skipped, Bytes: res.Bytes,
			Conflicts: orEmpty(res.Conflicts), Damaged: orEmpty(res.Damaged)})
	}
	verb := "copied"
	if dryRun {
		verb = "would copy"
	}
	fmt.Fprintf(env.Stdio.Out, "%s %s (%s) from %s to %s; %d already there\n",
		verb, count(res.Copied, "object"), sizeString(res.Bytes), src, dst, res.Skipped)
	return nil
}

func orEmpty(s []spool.SyncIssue) []spool.SyncIssue {
	if s == nil {
		return []spool.SyncIssue{}
	}
	return s
}

func count(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// sizeString shows a byte count for people.
func sizeString(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

type verifyJSON struct {
	Version  int                  `json:"version"`
	Spool    string               `json:"spool"`
	Objects  int                  `json:"objects"`
	Bytes    int64                `json:"bytes"`
	Problems []spoolcheck.Problem `json:"problems"`
}

// spoolVerifyOptions are the flags of muster spool verify.
type spoolVerifyOptions struct {
	Output output
}

func (o *spoolVerifyOptions) addFlags(fs *pflag.FlagSet) {
	o.Output.addFlags(fs, jsonFlag)
}

func cmdSpoolVerify() *Command {
	var o spoolVerifyOptions
	return &Command{
		Name:  "verify",
		Usage: "muster spool verify [--json]",
		Short: "check that every object in the spool is whole and where it belongs",
		Long: `Read every object of the spool and check it without any key: its name
follows the spool's layout (a known prefix, the right number of segments,
well-formed generation and sequence numbers), and its bytes are a whole
bundle by its header (format, body length, and for signed bundles the
signature and the name they were made for). In a directory spool, temp files
older than an hour and files no object name maps to (such as partial files
of an interrupted copy) are reported too.

Commits and repository indexes must be signed by the mesh key the spool's
mesh/keys publishes: one signed by another key, or a commit that does not
verify, is foreign (junk the mesh and hosts skip; nothing is deleted). The
commits' history is followed: a commit naming another commit than the spool
holds for a generation, or passing over one, is a fork (two histories of
the mesh merged).

Prints one line per problem on stdout, "KIND OBJECT: DETAIL", where KIND is
damaged, misfiled, unknown-prefix, bad-layout, size-mismatch, temp-file,
stray, foreign, fork or no-mesh-keys; and exits 1 if there is any. With
--json: {"version": 1, "spool", "objects", "bytes", "problems": [{"object",
"kind", "detail"}]}.

Sealed objects signed by another key only the hosts and the mesh can
refuse, when they open them with their keys.`,
		Examples: `muster spool verify --spool /media/usb/spool
muster spool verify --json |
  jq -r '.problems[] | select(.kind == "damaged") | .object'`,
		Global: []string{"spool", "mesh"},
		Exits:  []int{ExitFailure, ExitUsage, ExitTemporary},
		Flags:  o.addFlags,
		Run:    func(env *Env, args []string) error { return runSpoolVerify(env, o, args) },
	}
}

// openSpoolOrMesh opens the spool --spool (or MUSTER_SPOOL) names, else the
// one the mesh directory (--mesh or MUSTER_MESH) names.
func openSpoolOrMesh(env *Env) (spool.Spool, error) {
	loc := env.Global.Spool
	if loc == "" && env.Global.Mesh != "" {
		var err error
		if loc, err = mesh.SpoolOf(env.Global.Mesh); err != nil {
			return nil, err
		}
	}
	if loc == "" {
		return nil, fault.Usagef("no spool given: pass --spool SPOOL or --mesh DIR (whose spool is used), or set MUSTER_SPOOL or MUSTER_MESH")
	}
	return spool.Open(loc)
}

// runSpoolVerify checks every object of the spool, without any key.
func runSpoolVerify(env *Env, o spoolVerifyOptions, args []string) error {
	if err := needArgs(args, 0, 0, ""); err != nil {
		return err
	}
	f, err := o.Output.chosen()
	if err != nil {
		return err
	}
	sp, err := openSpoolOrMesh(env)
	if err != nil {
		return err
	}
	rep, err := spoolcheck.Verify(env.Ctx, sp, spoolcheck.Options{})
	if err != nil {
		return err
	}
	if f == jsonFormat {
		problems := rep.Problems
		if problems == nil {
			problems = []spoolcheck.Problem{}
		}
		if err := writeJSON(env.Stdio.Out, verifyJSON{spoolJSONVersion, rep.Spool, rep.Objects, rep.Bytes, problems}); err != nil {
			return err
		}
	} else {
		for _, p := range rep.Problems {
			fmt.Fprintln(env.Stdio.Out, outcome.Printable(p.String()))
		}
	}
	if len(rep.Problems) > 0 {
		return fmt.Errorf("spool %s: %s in %s", sp, count(len(rep.Problems), "problem"), count(rep.Objects, "object"))
	}
	if f != jsonFormat {
		fmt.Fprintf(env.Stdio.Out, "spool %s: %s (%s), no problems\n", sp, count(rep.Objects, "object"), sizeString(rep.Bytes))
	}
	return nil
}

// gcAssigned gives `spool gc --keep` the nodes each generation assigned a
// declaration bundle, from its manifest (gc.MovedPast says which
// generations every node has moved past). A manifest that cannot be read
// keeps its generation, with a warning; a spool that cannot be reached
// stops gc.
func gcAssigned(env *Env, m *mesh.Mesh) gc.Assigned {
	return func(ctx context.Context, gen uint64, run string) ([]string, bool, error) {
		man, err := declare.ManifestOf(ctx, m, gen, run)
		if errors.Is(err, spool.ErrUnavailable) || ctx.Err() != nil {
			return nil, false, err
		}
		if err != nil {
			env.Warnf("--keep: generation %d: %v; keeping it", gen, err)
			return nil, false, nil
		}
		ids := make([]string, len(man.Nodes))
		for i, n := range man.Nodes {
			ids[i] = n.NodeID
		}
		return ids, true, nil
	}
}

// gcRevoked gives `spool gc` the identities the mesh no longer trusts,
// with their reports and briefings as the report state and the registry's
// listing of briefings found them, and the report that carries each
// one's node's newest recovery copy, which stays. When the recovery
// copies cannot be read, no report is removed.
func gcRevoked(env *Env, reg *enrol.Registry, briefs map[string][]string, st *fleet.State) (map[string]gc.Revoked, error) {
	out := map[string]gc.Revoked{}
	for _, n := range reg.Nodes {
		for _, id := range append(slices.Clone(n.Past), n.Current) {
			if id != nil && id.Revoked() {
				out[id.NodeID] = gc.Revoked{Name: id.Name, RevokedAt: id.RevokedAt, Reason: id.RevokeReason,
					Objects: slices.Concat(briefs[id.NodeID], st.ReportNames(id.NodeID))}
			}
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	copies, err := st.RecoveryCopies()
	if err != nil {
		env.Warnf("the reports and briefings of revoked identities are kept: %v", err)
		return nil, nil
	}
	for _, c := range copies {
		if r, ok := out[c.NodeID]; ok {
			r.Keep = spool.ReportName(c.NodeID, c.Generation, c.Seq)
			out[c.NodeID] = r
		}
	}
	return out, nil
}

// gcDecided tells spool gc how the registry says each join request was
// decided.
func gcDecided(reg *enrol.Registry) func(tokenID, hostFP string) (string, bool) {
	return func(tokenID, hostFP string) (string, bool) {
		switch a, rf := reg.JoinDecision(tokenID, hostFP); {
		case a != nil:
			return fmt.Sprintf("admitted as %s%s; the admission stays", a.Name, recordedAt(a.AdmittedAt)), true
		case rf != nil:
			return fmt.Sprintf("refused%s: %s; the refusal stays", recordedAt(rf.RefusedAt), rf.Reason), true
		}
		return "", false
	}
}

// recordedAt is " at T" for a time a record holds, or "" for one it does not
// (records older muster wrote).
func recordedAt(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return " at " + t.UTC().Format(time.RFC3339)
}

// spoolGCOptions are the flags of muster spool gc.
type spoolGCOptions struct {
	DryRun  bool
	Keep    int
	Summary bool
}

func (o *spoolGCOptions) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.DryRun, "dry-run", false, "say what would be removed, remove nothing")
	fs.IntVar(&o.Keep, "keep", 0, "keep the declarations of the `N` newest committed generations (needs --mesh)")
	fs.BoolVar(&o.Summary, "summary", false, "print how many objects each rule removed, not one line per object")
}

func cmdSpoolGC() *Command {
	var o spoolGCOptions
	return &Command{
		Name:  "gc",
		Usage: "muster spool gc [--dry-run] [--keep N] [--summary]",
		Short: "remove temp files and objects no reader needs any more",
		Long: `Remove from the spool what no reader can need, by these rules only:

  - temp files (directory spools) older than an hour, left by interrupted
    writes;
  - declaration bundles and manifests of a declare run that lost the race
    for its generation (another run's commit names that generation), older
    than an hour;
  - with --keep N, declaration bundles of generations older than the N
    newest committed ones, but never of the newest, and never of a
    generation a node has not moved past (no newer generation assigned it
    a bundle; a revoked identity holds none back). Manifests stay, for
    report --history. This needs --mesh;
  - with the mesh (--mesh or MUSTER_MESH), the reports and briefings of
    revoked identities, which report refuses for good, except the newest
    report that carries a node's recovery copy, which a host joining again
    under the name still needs;
  - with the mesh, the join requests it has admitted or refused: the
    admission or refusal stays and is all that is read of the request from
    then on. Each command that admits lists the join requests, so on an
    object store this saves a request per 1,000 hosts ever enrolled;
  - with the mesh, a host's older reports of a generation that a newer
    report of that generation replaces in everything report shows: not
    the newest that verified, not the first that passed (the rollout's
    apply time), not one that ended later (last contact), and never one
    that did not verify or is of another history. A host reports on every
    run that finds something new and once per contact interval besides,
    and report and declare list every report on each run;
  - with the mesh, a node's briefings older than its newest, when that one
    verified: only the newest that verifies is read.

Commits, the other enrolment records, and the other reports and briefings
are never removed. Prints one line per object removed ("would remove" with
--dry-run), with the rule and why, or with --summary one line per rule
with how many: a daily gc of a large fleet removes millions of replaced
reports. If gc stops at an error, what it prints is what the store
confirmed removed. On an S3 spool it removes up to 1,000 objects a request
(DeleteObjects).`,
		Examples: `muster spool gc --dry-run
muster spool gc --mesh ~/.config/muster/mesh --keep 10
# on the mesh, daily: also decided join requests, superseded reports and
# briefings, and the reports of decommissioned and re-enrolled hosts
MUSTER_MESH=~/.config/muster/mesh muster spool gc --summary`,
		Global: []string{"spool", "mesh"},
		Exits:  []int{ExitFailure, ExitUsage, ExitRefused, ExitTemporary},
		Flags:  o.addFlags,
		Run:    func(env *Env, args []string) error { return runSpoolGC(env, o, args) },
	}
}

// runSpoolGC removes from the spool what no reader can need.
func runSpoolGC(env *Env, o spoolGCOptions, args []string) error {
	if err := needArgs(args, 0, 0, ""); err != nil {
		return err
	}
	opts := gc.Options{DryRun: o.DryRun, Now: env.Now()}
	var sp spool.Spool
	switch {
	case env.Changed("keep") && o.Keep < 1:
		return fault.Usagef("--keep %d: want at least 1 (the newest generation is always kept)", o.Keep)
	case o.Keep > 0 && env.Global.Mesh == "":
		return fault.WithHint(fault.Usagef("--keep needs the mesh, to know which generations nodes have moved past"), "pass --mesh DIR or set MUSTER_MESH")
	case env.Global.Mesh != "":
		m, err := openMesh(env)
		if err != nil {
			return err
		}
		sp, opts.MeshKey = m.Spool, m.Pair.Sign.Public().(ed25519.PublicKey)
		reg, err := enrol.LoadRegistry(env.Ctx, m)
		if err != nil {
			return err
		}
		env.Warn(reg.Warnings)
		env.Warn(reg.Skipped)
		// The reports alone: the recovery copies and the superseded
		// reports come from them, and the registry reads the briefings.
		st, err := fleet.Load(env.Ctx, m, reg, fleet.Options{CacheDir: filepath.Join(m.Dir, "cache"), NoBriefings: true})
		if err != nil {
			return err
		}
		briefs, refused, err := reg.SupersededBriefings(env.Ctx, m)
		if err != nil {
			return err
		}
		env.Warn(refused)
		opts.SupersededBriefings = briefs.Superseded
		if opts.Revoked, err = gcRevoked(env, reg, briefs.Names, st); err != nil {
			return err
		}
		opts.DecidedJoins = gcDecided(reg)
		opts.SupersededReports = st.SupersededReports()
		opts.Keep, opts.Assigned = o.Keep, gcAssigned(env, m)
		opts.Retired = func(nodeID string) bool {
			id := reg.Identities[nodeID]
			return id != nil && id.Revoked()
		}
		opts.Memo = mesh.CacheFile(m.CacheDir(), "gc-keep", m.Spool.String())
	default:
		var err error
		if sp, err = openSpoolOrMesh(env); err != nil {
			return err
		}
	}
	res, err := gc.Run(env.Ctx, sp, opts)
	if o.Summary {
		printRemovalCounts(env.Stdio.Out, res.Removed, o.DryRun)
	} else {
		printRemovals(env.Stdio.Out, res.Removed, o.DryRun)
	}
	env.Warn(res.Notes)
	if err != nil {
		return err
	}
	if len(res.Removed) == 0 {
		fmt.Fprintf(env.Stdio.Out, "spool %s: nothing to remove\n", sp)
	}
	return nil
}

func printRemovals(w io.Writer, rs []gc.Removal, dryRun bool) {
	verb := removedVerb(dryRun)
	for _, r := range rs {
		fmt.Fprintln(w, outcome.Printable(fmt.Sprintf("%s %s (%s: %s)", verb, r.Object, r.Rule, r.Detail)))
	}
}

// printRemovalCounts prints, for each rule that removed something, how
// many objects it removed, in the order the rules first appear.
func printRemovalCounts(w io.Writer, rs []gc.Removal, dryRun bool) {
	var rules []string
	counts := map[string]int{}
	for _, r := range rs {
		if counts[r.Rule] == 0 {
			rules = append(rules, r.Rule)
		}
		counts[r.Rule]++
	}
	verb := removedVerb(dryRun)
	for _, rule := range rules {
		fmt.Fprintf(w, "%s %s (%s)\n", verb, plural(counts[rule], "object"), rule)
	}
}

func removedVerb(dryRun bool) string {
	if dryRun {
		return "would remove"
	}
	return "removed"
}
