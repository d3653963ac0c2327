package cli

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/muster-tool/muster/internal/declaration"
	"github.com/muster-tool/muster/internal/declare"
	"github.com/muster-tool/muster/internal/enrol"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/fleet"
	"github.com/muster-tool/muster/internal/mesh"
	"github.com/muster-tool/muster/internal/outcome"
)

// declareOptions are the flags of muster declare.
type declareOptions struct {
	Check    bool
	DryRun   bool
	Output   output
	ValidFor time.Duration
	waveOptions
}

func (o *declareOptions) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.Check, "check", false, "validate only; needs no mesh and writes nothing")
	fs.BoolVar(&o.DryRun, "dry-run", false, "show per node what would change against the previous generation, old and new values and diffs of text; write nothing")
	o.Output.addFlags(fs, formatFlag{jsonFormat, "print the result as versioned JSON"})
	fs.Var((*daysFlag)(&o.ValidFor), "valid-for", "sign an expiry into the commit: hosts report the generation expired this long after it is declared (such as 36h or 7d)")
	o.waveOptions.addFlags(fs)
}

func cmdDeclare() *Command {
	var o declareOptions
	return &Command{
		Name:  "declare",
		Usage: "muster declare [--check | --dry-run] [--valid-for DURATION] [--wave NAME | --only PATTERN]... [--json] FILE... | -",
		Short: "validate the desired state and commit it as the next generation",
		Long: `Validate the declaration files (TOML, see muster-declaration(5); - reads
standard input) and commit them as the next generation in one write. Every
problem is reported with file:line and key, and a declaration with any error
writes nothing. A file over 64 MiB or nested more than 64 levels deep is
refused before it is parsed, and a node given more resources than its
host's report could hold is refused, naming the node.

A package the mesh's repository in the spool holds some version of
(muster spool repo add) comes from it: an exact version the repository
does not hold is refused at the package's file:line, naming the versions
it has (muster spool repo list shows them). --check does not look.

declare first admits pending join requests. It then resolves the desired
state for every enrolled, eligible node, renders its templated files from its
name, labels, vars and the facts of its newest briefing (a key a node lacks
is an error naming the template's line, the key and the node; every node's
are shown and nothing is written), writes one bundle per node (signed by
the mesh, encrypted to that node only, carrying the recovery copy of what the
node owns), and commits generation N+1 with a single create-if-absent write.
Nodes act only on committed generations. If another declare commits N+1 first,
this one compares again and writes N+2 (after three lost races it gives up
with a temporary failure). Ineligible nodes get nothing new and are listed
with their failed briefing lines; nodes no role selects are listed as
unmatched and get nothing new either. A node whose bundle cannot be sealed
(an identity an older muster admitted with an age key of low order) is
listed as unsealable with the reason and gets nothing new; the other nodes
still get the generation.

declare does not wait for nodes: it prints
'generation N declared: K nodes, I ineligible, U unmatched' and exits. Follow
progress with 'muster report', or gate a pipeline on it with
'muster report --wait'.

A rollout is staged with successive declares. --wave NAME (a wave of the
declaration's [rollout] section, see muster-declaration(5)) and --only
PATTERN (node names, as in a role's nodes) declare the generation for the
nodes they select only: the other nodes the declaration selects are held,
get no bundle, and keep the generation they have; report shows them as
held, not outstanding. A declare without them, once the wave's gate
passed, promotes the generation to every node.

Each commit names the commit it follows, so a generation has exactly one
history, and the mesh directory remembers the newest generation it
committed (history.toml). declare refuses (status 3) a spool whose newest
commit is older than that or belongs to another history: a spool restored
from an older copy, or a copy another operator declared on, must be synced
back first. Commits in the spool that do not verify against the mesh key
are skipped with a warning, never obeyed.

--valid-for signs an expiry into the commit: a host still applying the
generation after it (a frozen mirror, a stale stick) keeps enforcing it but
reports a failed line saying it expired. Without it a generation never
expires. A declare with --valid-for always commits, renewing the expiry.

Declaring an unchanged source (the same resources for the same node identities,
the same ineligible and unmatched nodes, and no expiry) writes nothing and says
'declaration unchanged: generation N stands'. --dry-run writes nothing at all,
so it does not admit pending join requests; for each changed resource it shows
the old and new value of each setting that changes and a unified diff of
changed text. Content marked secret never appears in any output: a changed
secret shows as 'content changed (secret, not shown)'.`,
		Examples: `muster declare --check site.toml
muster declare --dry-run site.toml
muster declare site.toml roles/*.toml
muster declare --wave canary site.toml && muster report --wait --timeout 20m
muster declare --only 'web-0[12]' site.toml
muster declare --valid-for 7d site.toml
generate-config | muster declare --json -`,
		Global: []string{"mesh", "spool"},
		Exits:  []int{ExitFailure, ExitUsage, ExitRefused, ExitTemporary},
		Flags:  o.addFlags,
		Run:    func(env *Env, args []string) error { return runDeclare(env, o, args) },
	}
}

// runDeclare validates the declaration files and commits them as the next
// generation, or with --check only validates them.
func runDeclare(env *Env, o declareOptions, args []string) error {
	if len(args) == 0 {
		return fault.Usagef("no declaration file given (use - for standard input)")
	}
	if o.Check && o.DryRun {
		return fault.Usagef("--check and --dry-run exclude each other")
	}
	f, err := o.Output.chosen()
	if err != nil {
		return err
	}
	if env.Changed("valid-for") && o.ValidFor <= 0 {
		return fault.Usagef("--valid-for %s: want a positive duration such as 36h or 7d", (*daysFlag)(&o.ValidFor))
	}
	valid := o.ValidFor
	decl, problems, err := parseDeclaration(env, args)
	refused := err != nil && problems != nil
	if f == jsonFormat && (o.Check && err == nil || refused) {
		if err := writeJSON(env.Stdio.Out, checkDocument(args, problems)); err != nil {
			return err
		}
	}
	if err != nil {
		return err
	}
	wave, err := o.waveOptions.wave(decl)
	if err != nil {
		return err
	}
	if o.Check {
		if f != jsonFormat {
			fmt.Fprintf(env.Stdio.Out, "declaration valid: %s\n", strings.Join(args, " "))
		}
		return nil
	}
	admit := admitPending
	if o.DryRun {
		// A dry run writes nothing: it shows the hosts waiting to join
		// as the real declare would admit them, and leaves their
		// requests pending.
		admit = previewAdmit
	}
	// The repository is checked before anyone is admitted: a refused
	// declaration writes nothing.
	m, reg, briefs, err := openFleetWith(env, func(env *Env, m *mesh.Mesh) (*enrol.Registry, error) {
		if err := checkRepository(env, m, decl, args, f); err != nil {
			return nil, err
		}
		return admit(env, m)
	})
	if err != nil {
		return err
	}
	res, err := declare.Declare(env.Ctx, m, reg, briefs, decl, declare.Options{
		DryRun: o.DryRun, Now: env.Now(), Recovery: recoveryCopies(env, m, reg), ValidFor: valid, Wave: wave,
	})
	var pe *declare.ProblemsError
	if errors.As(err, &pe) {
		if f == jsonFormat {
			if err := writeJSON(env.Stdio.Out, checkDocument(args, pe.Problems)); err != nil {
				return err
			}
		}
		return reportProblems(env, pe.Problems)
	}
	if err != nil {
		return err
	}
	for _, w := range res.Warnings {
		env.Warnf("%s", w)
	}
	for _, u := range res.Unsealable {
		env.Warnf("%s gets nothing new: its bundle cannot be sealed; give it a new key pair: muster enrol issue %s --reenrol, then join the host again with that token and --force", u.Name, u.Name)
	}
	if f == jsonFormat {
		return writeJSON(env.Stdio.Out, declareJSON{declareJSONVersion, res})
	}
	printDeclare(env.Stdio.Out, res)
	return nil
}

// parseDeclaration reads and parses the declaration files (- is standard
// input) and reports their problems on stderr; it returns them too, and
// an error that stops the command when one is not a warning.
func parseDeclaration(env *Env, args []string) (*declaration.Declaration, []declaration.Problem, error) {
	srcs, err := declaration.Load(args, env.Stdio.In)
	if err != nil {
		return nil, nil, err
	}
	decl, problems, err := declaration.ParseContext(env.Ctx, srcs)
	if err != nil {
		return nil, nil, err
	}
	if err := reportProblems(env, problems); err != nil {
		return nil, problems, err
	}
	return decl, problems, nil
}

// checkRepository refuses exact package versions the mesh's repository in
// the spool does not hold, for packages it holds some version of (see
// declare.RepositoryProblems), as it refuses any other problem at a
// declaration's entry.
func checkRepository(env *Env, m *mesh.Mesh, decl *declaration.Declaration, args []string, f format) error {
	problems, err := declare.RepositoryProblems(env.Ctx, m, decl)
	if err != nil || len(problems) == 0 {
		return err
	}
	if f == jsonFormat {
		if err := writeJSON(env.Stdio.Out, checkDocument(args, problems)); err != nil {
			return err
		}
	}
	return fault.WithHint(reportProblems(env, problems), declare.RepositoryHint)
}

// checkJSON is the document of declare --check --json, and of declare
// --json for a declaration refused: whether the files are valid, and
// every problem found, warnings included.
type checkJSON struct {
	Version  int           `json:"version"`
	Valid    bool          `json:"valid"`
	Files    []string      `json:"files"`
	Problems []problemJSON `json:"problems"`
}

// problemJSON is one problem: where (line 0: unknown), and what.
type problemJSON struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Key     string `json:"key"`
	Message string `json:"message"`
	Warning bool   `json:"warning"`
}

func checkDocument(files []string, problems []declaration.Problem) checkJSON {
	doc := checkJSON{Version: declareJSONVersion, Valid: true, Files: files}
	for _, p := range problems {
		doc.Valid = doc.Valid && p.Warning
		doc.Problems = append(doc.Problems, problemJSON{p.File, p.Line, p.Key, p.Message, p.Warning})
	}
	return doc
}

// declareJSONVersion is the version of declare --json's output, and of
// declare --check --json's, documented in muster-declare(1).
const declareJSONVersion = 1

// declareJSON is the document of declare --json.
type declareJSON struct {
	Version int `json:"version"`
	*declare.Result
}

// reportProblems prints validation problems; errors stop the command.
func reportProblems(env *Env, problems []declaration.Problem) error {
	n := 0
	for _, p := range problems {
		if p.Warning {
			env.Warnf("%s", p)
			continue
		}
		n++
		env.Errorf("%s", p)
	}
	if n > 0 {
		noun := "problems"
		if n == 1 {
			noun = "problem"
		}
		return closing(fault.Failure, fmt.Sprintf("declaration refused: %d %s, nothing was written", n, noun))
	}
	return nil
}

func printDeclare(w io.Writer, r *declare.Result) {
	wave, counts := "", fmt.Sprintf("%s, %d ineligible, %d unmatched", plural(len(r.Nodes), "node"), len(r.Ineligible), len(r.Unmatched))
	if r.Wave != "" {
		wave = " for wave " + r.Wave
		counts = fmt.Sprintf("%s, %d held, %d ineligible, %d unmatched", plural(len(r.Nodes), "node"), len(r.Held), len(r.Ineligible), len(r.Unmatched))
	}
	switch {
	case r.Unchanged:
		fmt.Fprintf(w, "declaration unchanged: generation %d stands\n", r.Generation)
	case r.DryRun:
		fmt.Fprintf(w, "dry run: generation %d would be declared%s: %s (nothing written)\n", r.Generation, wave, counts)
	default:
		fmt.Fprintf(w, "generation %d declared%s: %s\n", r.Generation, wave, counts)
	}
	if len(r.Held) > 0 && !r.Unchanged {
		fmt.Fprintln(w, heldLine(r.Held))
	}
	if r.ExpiresAt != nil && !r.Unchanged {
		fmt.Fprintf(w, "valid until %s\n", r.ExpiresAt.Format(time.RFC3339))
	}
	if r.DryRun && !r.Unchanged {
		same := 0
		shown := map[string]string{} // change key → the node it was shown for
		for _, n := range r.Nodes {
			if n.Same() {
				same++
				continue
			}
			fmt.Fprintf(w, "  %s: %d added, %d changed, %d removed\n", n.Name, len(n.Added), len(n.Changed), len(n.Removed))
			if n.PreviousNodeID != "" {
				fmt.Fprintf(w, "    re-enrolled: identity %s replaces %s\n", n.NodeID, n.PreviousNodeID)
			}
			for _, id := range n.Added {
				fmt.Fprintf(w, "    + %s\n", id)
			}
			changes := make(map[string]declare.ResourceChange, len(n.Changes))
			for _, c := range n.Changes {
				changes[c.ID] = c
			}
			for _, id := range n.Changed {
				c, ok := changes[id]
				if first, seen := shown[c.Key]; ok && seen {
					fmt.Fprintf(w, "    ~ %s (as for %s)\n", id, first)
					continue
				}
				fmt.Fprintf(w, "    ~ %s\n", id)
				if ok {
					shown[c.Key] = n.Name
					printChange(w, c)
				}
			}
			for _, id := range n.Removed {
				fmt.Fprintf(w, "    - %s\n", id)
			}
		}
		if same > 0 {
			fmt.Fprintf(w, "  %s unchanged\n", plural(same, "node"))
		}
	}
	for _, in := range r.Ineligible {
		fmt.Fprintf(w, "ineligible: %s\n", in.Name)
		for _, l := range in.Failed {
			writeFailedLine(w, l)
		}
	}
	for _, u := range r.Unmatched {
		fmt.Fprintf(w, "unmatched: %s (no role selects it)\n", u)
	}
	for _, u := range r.Unsealable {
		fmt.Fprintf(w, "unsealable: %s (identity %s): %s\n", u.Name, u.NodeID, u.Reason)
	}
}

// printChange shows how one resource changes in a dry run: each setting's
// old and new value, and the content's unified diff or a note for secret
// and binary content, indented under the resource's line.
func printChange(w io.Writer, c declare.ResourceChange) {
	const indent = "        "
	if c.Note != "" {
		fmt.Fprintf(w, "%s(%s)\n", indent, c.Note)
	}
	for _, s := range c.Settings {
		fmt.Fprintf(w, "%s%s: %s → %s\n", indent, s.Name, outcome.Printable(s.Old), outcome.Printable(s.New))
	}
	if c.Content == "" {
		return
	}
	// The content can hold what a host said of itself, rendered by a
	// template: shown as muster(1) QUOTED TEXT says, tabs as tabs.
	for line := range strings.SplitSeq(strings.TrimSuffix(c.Content, "\n"), "\n") {
		fmt.Fprintf(w, "%s%s\n", indent, outcome.PrintableLine(line))
	}
}

// recoveryCopies gives declare the newest recovery copy per node, read
// through the report cache (so a declare after a report reads only new
// reports). The briefings were read with the registry, so the load leaves
// them out. Without it a declare still commits, with a warning: a host that
// keeps its state needs no recovery copy.
func recoveryCopies(env *Env, m *mesh.Mesh, reg *enrol.Registry) func(string) (declare.Recovery, bool) {
	st, err := fleet.Load(env.Ctx, m, reg, fleet.Options{CacheDir: filepath.Join(m.Dir, "cache"), NoBriefings: true})
	if err != nil {
		env.Warnf("recovery copies not available, bundles carry none this time: %v", err)
		return nil
	}
	copies, err := st.RecoveryCopies()
	if err != nil {
		env.Warnf("recovery copies not available, bundles carry none this time: %v", err)
		return nil
	}
	return func(name string) (declare.Recovery, bool) {
		c, ok := copies[name]
		return declare.Recovery{NodeID: c.NodeID, Ledger: c.Ledger}, ok
	}
}
