package cli

import (
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/muster-tool/muster/internal/declaration"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/fleet"
	"github.com/muster-tool/muster/internal/gcpace"
	"github.com/muster-tool/muster/internal/outcome"
)

// reportOptions are the flags of muster report.
type reportOptions struct {
	Generation generationFlag
	Output     output
	Sort       string
	All        bool
	History    bool
	FailOn     string
	Nodes      []string
	Last       countFlag
	waitOptions
}

func (o *reportOptions) addFlags(fs *pflag.FlagSet) {
	fs.Var(&o.Generation, "generation", "report on generation `N` instead of the newest committed")
	o.Output.addFlags(fs, tableFlag, jsonFlag, htmlFlag)
	fs.Var(&o.Last, "last", fmt.Sprintf("with --html, chart the last `N` generations up to the one reported on (default %d)", fleet.PageGenerations))
	fs.StringVar(&o.Sort, "sort", "name", "order nodes by `KEY`: name, status or contact")
	fs.BoolVar(&o.All, "all", false, "also list applied and decommissioned nodes, and every refused or flagged report")
	fs.BoolVar(&o.History, "history", false, "show every generation with its applied, failed and outstanding counts as of now, and the wave it was declared for")
	fs.StringVar(&o.FailOn, "fail-on", "failed", "exit non-zero when a node is `WHAT`: failed, outstanding (or failed), or none; with --wait the default is outstanding")
	fs.StringArrayVar(&o.Nodes, "nodes", nil, "limit the report to the nodes whose name matches `PATTERN`, a shell pattern as in a role's nodes (may be given more than once)")
	o.waitOptions.addFlags(fs)
	fs.SetAnnotation("sort", choicesAnnotation, []string{"name", "status", "contact"})
	fs.SetAnnotation("fail-on", choicesAnnotation, []string{"failed", "outstanding", "none"})
}

func cmdReport() *Command {
	var o reportOptions
	return &Command{
		Name: "report",
		Usage: `muster report [NODE...] [--nodes PATTERN] [--generation N] [--table | --json | --html FILE [--last N]] [--sort KEY] [--all] [--fail-on WHAT]
muster report --wait [--until TARGET] [--timeout DURATION] [--interval DURATION] [NODE...] [--nodes PATTERN] [--generation N] [...]
muster report --history [NODE...] [--nodes PATTERN] [--table | --json]`,
		Short: "show which nodes applied a generation, which failed and why, which are outstanding",
		Long: `Show where every node stands on a generation (default the newest committed):

  applied      it reported the generation and every line was verified
  failed       it reported the generation with failed lines; the reasons
               the host gave are shown
  outstanding  it was assigned the generation and has not reported it yet;
               its last applied generation and last contact are shown
  ineligible   its newest briefing has failed lines (shown)
  unassigned   no role selects it
  held         a staged rollout declared the generation for a wave that
               leaves it out (declare --wave, --only): it keeps the
               generation it had, shown

Whether a node was assigned, held, ineligible or unassigned is what the
generation's manifest recorded when it was declared: a node assigned the
generation is judged on its reports even if it has become ineligible since.
Last contact is the time of the node's newest report or briefing, shown as
it is: there is no threshold, and a node off for weeks is outstanding,
never failed.

Reports are verified against the identity they are filed under. Reports from
revoked or unknown identities and reports that fail verification are refused
and counted; reports that claim a generation newer than the newest committed,
or another node, are flagged with a warning; neither is counted. --all lists
them, and applied and decommissioned nodes too. A revoked identity's reports
are refused for good: each is counted on stderr once (the cache remembers it),
and 'muster spool gc' with the mesh removes them. report reads the mesh and
changes nothing: join requests waiting to be admitted are counted on stderr and
left to enrol admit and declare, so a monitoring job never admits a host.

The default output is a summary: the totals, then one line per node that
did not apply the generation, with its reason whole. --table is for
people: one line per node, as wide as the terminal (80 columns when
stdout is not one), a long reason shortened in the middle. --json
(versioned, see muster-report(1)) is for machines. NODE arguments limit the
report to those nodes, list each of them and give their reasons whole.
--history shows every generation with how many nodes applied it, failed it
or are outstanding on it now.

--html FILE (- for standard output) writes the same report as one HTML page
that works opened from disk with no network: the counts, a bar per
generation and a chart of how fast each of the last generations (--last N,
default 20) was applied after it was declared, and every node with its
status, last applied generation, last contact and failed lines, to filter,
search and sort. The file is replaced whole; with --wait it is written when
the wait ends. It holds node names and the reasons hosts gave, which the
spool keeps encrypted: keep it as you keep the other outputs of report.

The exit status says whether a node failed (--fail-on failed, the default:
5), or also whether one is outstanding (--fail-on outstanding: 5 if one
failed, else 6); --fail-on none always exits 0 when the report was made.

--wait is a pipeline's gate: it looks at the spool every --interval until
--until holds for the nodes assigned the generation (applied=N, applied=P%
of them, or all-applied, the default), and exits 0. It stops at once with
status 5 when one of them fails (unless --fail-on none), and at --timeout
with status 6 if some are still outstanding (unless --fail-on failed or
none: then 0), and prints the report, who is outstanding and their last
contact included. Outstanding is never taken for failed. NODE and --nodes
limit whom it waits for; held, ineligible and unassigned nodes are never
waited for. Progress goes to stderr: a line rewritten in place on a
terminal, otherwise one line per node that changes. Without --wait, report
never waits.

What was read before is remembered in DIR/cache in the mesh directory, so
the next report reads only new objects; the cache can be deleted at any
time and is rebuilt from the spool.`,
		Examples: `# in a pipeline, after muster declare: fail the job if a node failed
muster report
# a gate: wait until 90% of the web nodes applied, fail fast if one fails
muster report --wait --until applied=90% --nodes 'web-*' --timeout 30m
# wait for all, but let switched-off nodes stay outstanding without failing
muster report --wait --timeout 1h --fail-on failed
# who has not applied generation 41 yet, longest silent first
muster report --generation 41 --table --sort contact
# a page to look at: open rollout.html in a browser, no network needed
muster report --html rollout.html --fail-on none
# the failed lines of every failed node
muster report --json | jq -r '.nodes[] | select(.status == "failed") |
  .name as $n | .failed_lines[] | "\($n) \(.id): \(.detail)"'
muster report --history --table`,
		Global: []string{"mesh", "spool"},
		Exits:  []int{ExitFailure, ExitUsage, ExitRefused, ExitTemporary, ExitNodesFailed, ExitNodesOutstanding},
		Flags:  o.addFlags,
		Run:    func(env *Env, args []string) error { return runReport(env, o, args) },
	}
}

// runReport shows where every node (or those args name) stands on a
// generation, or with --history on every generation, and exits with the
// status --fail-on asks for.
func runReport(env *Env, o reportOptions, args []string) error {
	f, err := checkReportFlags(env, &o)
	if err != nil {
		return err
	}
	gcpace.ForReading()
	m, err := openMesh(env)
	if err != nil {
		return err
	}
	// The report cache is read and the spool listed while the registry
	// loads, and the pending join requests are counted while the load
	// finishes: at 100,000 nodes each takes a second or so.
	ld := fleet.Start(env.Ctx, m, fleet.Options{CacheDir: filepath.Join(m.Dir, "cache")})
	reg, tell, err := startReadOnlyAdmit(env, m)
	if err != nil {
		ld.Abandon()
		return err
	}
	st, err := ld.Finish(reg)
	tell()
	if err != nil {
		return err
	}
	sel := fleet.Selection{Names: args, Patterns: o.Nodes, All: o.All}
	if o.Wait {
		if !env.Changed("fail-on") {
			o.FailOn = "outstanding"
		}
		return runReportWait(env, o, f, m, reg, st, sel)
	}
	var hist []fleet.HistoryEntry
	if o.History {
		if hist, err = st.History(env.Ctx, sel); err != nil {
			env.Warn(st.Warnings)
			return err
		}
	}
	v, err := st.Generation(env.Ctx, uint64(o.Generation), sel)
	env.Warn(st.Warnings)
	if err != nil {
		return err
	}
	if err := fleet.SortNodes(v.Nodes, o.Sort); err != nil {
		return err
	}
	warnObjects(env, st, v, o.All)
	if err := writeReport(env, f, o, st, v, hist, sel); err != nil {
		return err
	}
	return failOnStatus(v.Totals, o.FailOn)
}

// checkReportFlags returns the output format asked for, and refuses flags
// that exclude each other and values report does not know, before
// anything is read.
func checkReportFlags(env *Env, o *reportOptions) (format, error) {
	f, err := o.Output.chosen()
	if err != nil {
		return f, err
	}
	if o.History && o.Generation != 0 {
		return f, fault.Usagef("--history and --generation exclude each other")
	}
	if err := checkPageFlags(f, o); err != nil {
		return f, err
	}
	switch o.FailOn {
	case "failed", "outstanding", "none":
	default:
		return f, fault.Usagef("--fail-on %q: want failed, outstanding or none", o.FailOn)
	}
	for _, p := range o.Nodes {
		if err := declaration.CheckPattern(p); err != nil {
			return f, fault.Usagef("--nodes: %v", err)
		}
	}
	if err := o.waitOptions.check(env, o.History); err != nil {
		return f, err
	}
	return f, fleet.SortNodes(nil, o.Sort)
}

// printReport prints the view, or with --history the history, in format
// f. named says the nodes were named on the command line: they are all
// listed, their details whole.
func printReport(w io.Writer, f format, o reportOptions, named bool, v *fleet.View, hist []fleet.HistoryEntry, now time.Time) error {
	switch {
	case o.History && f == jsonFormat:
		return fleet.WriteHistoryJSON(raw(w), hist)
	case o.History:
		return historyTable(w, hist, now)
	case f == jsonFormat:
		return fleet.WriteJSON(raw(w), v, o.All)
	case f == tableFormat:
		return reportTable(w, v, o.All, named, now)
	default:
		reportSummary(w, v, o.All, named, now)
	}
	return nil
}

// generationFlag is --generation: a generation number, with no default to
// show (0 means the newest).
type generationFlag uint64

func (g *generationFlag) String() string {
	if *g == 0 {
		return ""
	}
	return strconv.FormatUint(uint64(*g), 10)
}

func (g *generationFlag) Set(s string) error {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 {
		return fmt.Errorf("want a generation number, 1 or more")
	}
	*g = generationFlag(n)
	return nil
}

func (g *generationFlag) Type() string { return "uint" }

// failOnStatus turns the totals into the exit status --fail-on asks for.
// It prints nothing: the report has said it all.
func failOnStatus(t fleet.Totals, failOn string) error {
	switch {
	case failOn == "none":
		return nil
	case t.Failed > 0:
		return quietly(fault.NodesFailed)
	case failOn == "outstanding" && t.Outstanding > 0:
		return quietly(fault.NodesOutstanding)
	}
	return nil
}

// warnObjects says on stderr which reports were flagged, and how many
// were refused. Reports from revoked identities are counted once each:
// refused for good, they are news only the first time (see fleet.State.Tell).
func warnObjects(env *Env, st *fleet.State, v *fleet.View, all bool) {
	for _, o := range v.Flagged {
		env.Warnf("report %s from %s is flagged and not counted: %s", o.Name, o.Node, o.Reason)
	}
	listed := " (listed with --all)"
	if all {
		listed = ""
	}
	c := v.RefusedCounts()
	if n := c[fleet.RefusedUnverified]; n > 0 {
		env.Warnf("%s failed verification and %s refused%s", plural(n, "report"), isAre(n), listed)
	}
	if n := c[fleet.RefusedUnknown]; n > 0 {
		env.Warnf("%s filed under node ids no identity has %s refused%s", plural(n, "report"), isAre(n), listed)
	}
	n := 0
	for _, o := range v.Refused {
		if o.Kind == fleet.RefusedRevoked && !o.Told {
			n++
		}
	}
	if n > 0 {
		fmt.Fprintf(env.Stdio.Err, "muster: %s from revoked identities %s refused%s; each is said once, and muster spool gc removes them\n",
			plural(n, "new report"), isAre(n), listed)
		env.Warn(st.Tell(v.Refused))
	}
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func isAre(n int) string {
	if n == 1 {
		return "was"
	}
	return "were"
}

// totalsLine is the head of the summary: the generation, then the totals.
func totalsLine(v *fleet.View, now time.Time) string {
	gen := fmt.Sprintf("generation %d", v.Generation)
	if v.Wave != "" {
		gen += " for wave " + v.Wave
	}
	if v.Generation != v.Newest {
		gen += fmt.Sprintf(" (the newest is %d)", v.Newest)
	}
	t := v.Totals
	parts := []string{
		fmt.Sprintf("%d applied", t.Applied), fmt.Sprintf("%d failed", t.Failed), fmt.Sprintf("%d outstanding", t.Outstanding),
		fmt.Sprintf("%d ineligible", t.Ineligible), fmt.Sprintf("%d unassigned", t.Unassigned),
	}
	if t.Held > 0 {
		parts = append(parts, fmt.Sprintf("%d held", t.Held))
	}
	if t.Decommissioned > 0 {
		parts = append(parts, fmt.Sprintf("%d decommissioned", t.Decommissioned))
	}
	declared := "declared " + when(v.DeclaredAt, now)
	switch {
	case v.ExpiresAt.IsZero():
	case now.After(v.ExpiresAt):
		declared += ", expired " + when(v.ExpiresAt, now)
	default:
		declared += ", valid until " + when(v.ExpiresAt, now)
	}
	return fmt.Sprintf("%s, %s\n%s: %s", gen, declared, plural(t.Nodes, "node"), strings.Join(parts, ", "))
}

// detail is why a node stands where it does, in one line.
func detail(n *fleet.NodeStatus, now time.Time) string {
	var parts []string
	switch n.Status {
	case fleet.Applied:
		parts = append(parts, "reported "+when(n.Report.End, now))
	case fleet.Failed, fleet.Ineligible:
		parts = append(parts, linesText(n.FailedLines, "; "))
	case fleet.Outstanding, fleet.Held:
		if n.LastApplied > 0 {
			parts = append(parts, fmt.Sprintf("last applied generation %d", n.LastApplied))
		} else {
			parts = append(parts, "has applied no generation")
		}
		if n.LastContact.IsZero() {
			parts = append(parts, "no report or briefing received yet")
		} else {
			parts = append(parts, "last contact "+when(n.LastContact, now))
		}
	}
	if n.Note != "" {
		parts = append(parts, n.Note)
	}
	var keep []string
	for _, p := range parts {
		if p != "" {
			keep = append(keep, p)
		}
	}
	return strings.Join(keep, "; ")
}

func linesText(ls []outcome.Line, sep string) string {
	var out []string
	for _, l := range ls {
		s := outcome.Printable(l.ID)
		if l.Detail != "" {
			s += ": " + outcome.Printable(l.Detail)
		}
		out = append(out, s)
	}
	return strings.Join(out, sep)
}

// writeFailedLine writes a failed line of a node's report or briefing
// below the node, indented, the way every listing for people does.
func writeFailedLine(w io.Writer, l outcome.Line) {
	fmt.Fprintf(w, "  failed %s: %s\n", outcome.Printable(l.ID), outcome.Printable(l.Detail))
}

func reportSummary(w io.Writer, v *fleet.View, all, named bool, now time.Time) {
	fmt.Fprintln(w, totalsLine(v, now))
	var shown []*fleet.NodeStatus
	sw, nw := 0, 0
	for i := range v.Nodes {
		n := &v.Nodes[i]
		if n.Status == fleet.Applied && !all && !named {
			continue
		}
		shown = append(shown, n)
		sw, nw = max(sw, len(n.Status)), max(nw, len(n.Name))
	}
	for _, n := range shown {
		fmt.Fprintf(w, "%-*s  %-*s  %s\n", sw, n.Status, nw, n.Name, detail(n, now))
	}
	if !all {
		return
	}
	for _, l := range []struct {
		title string
		objs  []fleet.Object
	}{{"refused reports", v.Refused}, {"flagged reports", v.Flagged}} {
		if len(l.objs) == 0 {
			continue
		}
		fmt.Fprintf(w, "%s:\n", l.title)
		for _, o := range l.objs {
			fmt.Fprintf(w, "  %s %s: %s\n", o.Name, o.Kind, outcome.Printable(o.Reason))
		}
	}
}

// reportTable shows every node of the view on one line, fitted to the
// terminal: the detail is shortened in the middle where it must be. whole
// (report NODE...) shows every detail whole instead, each failed line on
// a line of its own.
func reportTable(w io.Writer, v *fleet.View, all, whole bool, now time.Time) error {
	fmt.Fprintln(w, totalsLine(v, now))
	var rows [][]string
	for i := range v.Nodes {
		n := &v.Nodes[i]
		contact := ""
		if n.Status != fleet.Decommissioned {
			contact = ago(now.Sub(n.LastContact))
			if n.LastContact.IsZero() {
				contact = "never"
			}
		}
		var det []string
		switch n.Status {
		case fleet.Failed, fleet.Ineligible:
			for _, l := range n.FailedLines {
				det = append(det, linesText([]outcome.Line{l}, ""))
			}
		case fleet.Outstanding, fleet.Held:
			if n.LastApplied > 0 {
				det = append(det, fmt.Sprintf("last applied generation %d", n.LastApplied))
			} else {
				det = append(det, "has applied no generation")
			}
		}
		if n.Note != "" {
			det = append(det, n.Note)
		}
		if !whole {
			rows = append(rows, []string{n.Name, string(n.Status), contact, strings.Join(det, "; ")})
			continue
		}
		first := ""
		if len(det) > 0 {
			first = det[0]
		}
		rows = append(rows, []string{n.Name, string(n.Status), contact, first})
		for _, d := range det[min(1, len(det)):] {
			rows = append(rows, []string{"", "", "", d})
		}
	}
	cols := []column{{title: "NODE"}, {title: "STATUS"}, {title: "LAST CONTACT"}, {title: "DETAIL", shorten: !whole}}
	if err := writeTable(w, cols, rows); err != nil {
		return err
	}
	if !all || len(v.Refused)+len(v.Flagged) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	rows = nil
	for _, o := range append(append([]fleet.Object(nil), v.Refused...), v.Flagged...) {
		rows = append(rows, []string{o.Name, o.Node, o.Kind + ": " + outcome.Printable(o.Reason)})
	}
	return writeTable(w, []column{{title: "REFUSED OR FLAGGED REPORT", shorten: true}, {title: "NODE"}, {title: "WHY", shorten: true}}, rows)
}

// staged reports whether some generation of the history was declared for
// a wave: only then does the history show the waves and the held nodes.
func staged(h []fleet.HistoryEntry) bool {
	for _, e := range h {
		if e.Wave != "" || e.Totals.Held > 0 {
			return true
		}
	}
	return false
}

// historyTable shows every generation on one line, fitted to the
// terminal: it is report --history with or without --table. A staged
// rollout adds how many nodes each generation held and its wave.
func historyTable(w io.Writer, h []fleet.HistoryEntry, now time.Time) error {
	waves := staged(h)
	var rows [][]string
	for _, e := range h {
		row := []string{fmt.Sprint(e.Generation), e.DeclaredAt.UTC().Format("2006-01-02 15:04"),
			fmt.Sprint(e.Totals.Applied), fmt.Sprint(e.Totals.Failed), fmt.Sprint(e.Totals.Outstanding)}
		if waves {
			wave := e.Wave
			if wave == "" {
				wave = "(all)"
			}
			row = append(row, fmt.Sprint(e.Totals.Held), wave)
		}
		rows = append(rows, row)
	}
	cols := []column{{title: "GENERATION"}, {title: "DECLARED (UTC)"}, {title: "APPLIED"}, {title: "FAILED"}, {title: "OUTSTANDING"}}
	if waves {
		cols = append(cols, column{title: "HELD"}, column{title: "WAVE", shorten: true})
	}
	return writeTable(w, cols, rows)
}
