package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/spf13/pflag"

	"github.com/muster-tool/muster/internal/brief"
	"github.com/muster-tool/muster/internal/enrol"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/mesh"
	"github.com/muster-tool/muster/internal/outcome"
	"github.com/muster-tool/muster/spool"
)

// briefOptions are the flags of muster brief, run on a host.
type briefOptions struct {
	Output output
	Send   bool
}

// The briefing's own formats, as brief and brief show offer them.
var (
	briefingJSONFlag = formatFlag{jsonFormat, "print the briefing as JSON"}
	briefingTOMLFlag = formatFlag{tomlFormat, "print the briefing as TOML"}
)

func (o *briefOptions) addFlags(fs *pflag.FlagSet) {
	o.Output.addFlags(fs, briefingJSONFlag, briefingTOMLFlag)
	fs.BoolVar(&o.Send, "send", false, "write the briefing to the spool")
}

func cmdBrief() *Command {
	var o briefOptions
	return &Command{
		Name:  "brief",
		Usage: "muster brief [--json | --toml] [--send]\nmuster brief show NAME [--json]\nmuster brief list [--table | --json]",
		Short: "run this host's briefing checks; show briefings (mesh)",
		Long: `On a host, 'muster brief' runs the briefing checks and prints the briefing: one
line per check with its status (ok, warn, failed) and detail. The checks: OS
and version, architecture, package manager present and usable, init system,
free space on the state and root filesystems (thresholds in the host config,
see muster-config(5)), clock sanity, spool readable and writable, muster
version. The briefing also carries the host's facts, which declaration
templates use: host name, OS id, version and codename, architecture, CPU
count, memory and IP addresses. --send writes it to the spool, signed by
the host and encrypted to the mesh.

A briefing's outcome is computed from its lines, never stored: a node whose
newest briefing has a failed line is enrolled but ineligible, and declare
assigns it nothing until a newer briefing passes.

On the mesh, 'brief show NAME' and 'brief list' show the newest briefing per
node with the computed outcome.`,
		Examples: `muster brief
muster brief --send
muster brief show web-1
muster brief list --table`,
		Global:     []string{"spool", "config", "state", "root"},
		HostConfig: true,
		Exits:      []int{ExitFailure, ExitUsage, ExitRefused, ExitTemporary},
		Flags:      o.addFlags,
		Run:        func(env *Env, args []string) error { return runBrief(env, o, args) },
		Sub:        []*Command{cmdBriefShow(), cmdBriefList()},
	}
}

// runBrief runs this host's briefing checks and prints the briefing, and
// with --send writes it to the spool.
func runBrief(env *Env, o briefOptions, args []string) error {
	if err := needArgs(args, 0, 0, ""); err != nil {
		return err
	}
	f, err := o.Output.chosen()
	if err != nil {
		return err
	}
	cfg, id, err := openHost(env)
	if err != nil {
		return err
	}
	sp, err := spool.Open(cfg.Spool)
	if err != nil {
		return err
	}
	th := cfg.Brief.WithDefaults()
	benv := brief.Env{Node: cfg.Node, Root: cfg.Root, State: cfg.State, Spool: sp,
		MinFreeStateMB: th.MinFreeStateMB, MinFreeRootMB: th.MinFreeRootMB, Version: Version(), Now: env.Now()}
	if pub, err := mesh.FetchPublished(env.Ctx, sp, id.Mesh); err == nil {
		benv.MeshCreated = pub.Created
	}
	var b *brief.Briefing
	if o.Send {
		b, err = enrol.SendBriefing(env.Ctx, sp, id, benv)
		if err != nil {
			return err
		}
	} else {
		b = brief.Run(env.Ctx, benv)
	}
	if err := printBriefing(env.Stdio.Out, b, f); err != nil {
		return err
	}
	if o.Send {
		fmt.Fprintf(env.Stdio.Err, "muster: briefing sent to %s\n", sp)
	}
	return nil
}

// briefingJSON is a briefing with its computed outcome, for output only.
type briefingJSON struct {
	*brief.Briefing
	Outcome string `json:"outcome"`
}

func printBriefing(w io.Writer, b *brief.Briefing, f format) error {
	switch f {
	case jsonFormat:
		return writeJSON(w, briefingJSON{b, eligibilityWord(b)})
	case tomlFormat:
		return toml.NewEncoder(raw(w)).Encode(b)
	}
	fmt.Fprintf(w, "briefing of %s at %s: %s\n", outcome.Printable(b.Node), b.Time.UTC().Format("2006-01-02 15:04:05 UTC"), eligibilityWord(b))
	for _, l := range b.Lines {
		fmt.Fprintf(w, "  %-7s %-16s %s\n", l.Status, outcome.Printable(l.ID), outcome.Printable(l.Detail))
	}
	if b.Facts == nil {
		return nil
	}
	// Facts by the names templates use; one the host could not read is
	// missing from the map and shown as such.
	fmt.Fprintf(w, "facts, as templates see them (.Facts.NAME):\n")
	m := b.Facts.Map()
	for _, name := range brief.FactNames {
		v, ok := m[name]
		switch list, isList := v.([]string); {
		case !ok:
			v = "(not known)"
		case isList && len(list) == 0:
			v = "(none)"
		case isList:
			v = strings.Join(list, " ")
		}
		fmt.Fprintf(w, "  %-16s %s\n", name, outcome.Printable(fmt.Sprint(v)))
	}
	return nil
}

func eligibilityWord(b *brief.Briefing) string {
	if b.Eligible() {
		return "eligible"
	}
	return "ineligible"
}

// eligibility describes a node's newest briefing for listings.
func eligibility(b *brief.Briefing) (string, []outcome.Line) {
	if b == nil {
		return "no briefing", nil
	}
	if b.Eligible() {
		return "eligible", nil
	}
	return "ineligible", outcome.FailedLines(b.Lines)
}

// briefShowOptions are the flags of muster brief show.
type briefShowOptions struct {
	Output output
}

func (o *briefShowOptions) addFlags(fs *pflag.FlagSet) {
	o.Output.addFlags(fs, briefingJSONFlag)
}

func cmdBriefShow() *Command {
	var o briefShowOptions
	return &Command{
		Name:  "show",
		Usage: "muster brief show NAME [--json]",
		Short: "show a node's newest briefing (mesh)",
		Long: `Show the newest briefing of node NAME with its outcome, computed from its
lines. It changes nothing: join requests waiting to be admitted are counted on
stderr and left to enrol admit and declare.`,
		Examples: "muster brief show web-1",
		Global:   []string{"mesh", "spool"},
		Exits:    []int{ExitFailure, ExitUsage, ExitRefused, ExitTemporary},
		Flags:    o.addFlags,
		Run:      func(env *Env, args []string) error { return runBriefShow(env, o, args) },
	}
}

// runBriefShow prints the newest briefing of one node.
func runBriefShow(env *Env, o briefShowOptions, args []string) error {
	if err := needArgs(args, 1, 1, "node NAME"); err != nil {
		return err
	}
	f, err := o.Output.chosen()
	if err != nil {
		return err
	}
	m, err := openMesh(env)
	if err != nil {
		return err
	}
	reg, err := readOnlyAdmit(env, m)
	if err != nil {
		return err
	}
	id := reg.Enrolled(args[0])
	if id == nil {
		return fault.WithHint(fmt.Errorf("node %s is not enrolled", args[0]), "see: muster enrol list")
	}
	// This node's briefings alone, not the fleet's.
	b, refused, err := reg.Briefing(env.Ctx, m, id.NodeID)
	if err != nil {
		return err
	}
	env.Warn(refused)
	if b == nil {
		return fmt.Errorf("node %s has sent no briefing yet", args[0])
	}
	return printBriefing(env.Stdio.Out, b, f)
}

// briefListOptions are the flags of muster brief list.
type briefListOptions struct {
	Output output
}

func (o *briefListOptions) addFlags(fs *pflag.FlagSet) {
	o.Output.addFlags(fs, tableFlag, jsonFlag)
}

func cmdBriefList() *Command {
	var o briefListOptions
	return &Command{
		Name:  "list",
		Usage: "muster brief list [--table | --json]",
		Short: "list every node's newest briefing outcome (mesh)",
		Long: `List every enrolled node with the outcome of its newest briefing and the failed
lines of ineligible nodes. It changes nothing: join requests waiting to be
admitted are counted on stderr and left to enrol admit and declare.`,
		Examples: "muster brief list --table",
		Global:   []string{"mesh", "spool"},
		Exits:    []int{ExitFailure, ExitUsage, ExitRefused, ExitTemporary},
		Flags:    o.addFlags,
		Run:      func(env *Env, args []string) error { return runBriefList(env, o, args) },
	}
}

// runBriefList lists every enrolled node with the outcome of its newest
// briefing.
func runBriefList(env *Env, o briefListOptions, args []string) error {
	if err := needArgs(args, 0, 0, ""); err != nil {
		return err
	}
	f, err := o.Output.chosen()
	if err != nil {
		return err
	}
	_, reg, briefs, err := openFleet(env)
	if err != nil {
		return err
	}
	var rows []briefListRow
	for _, id := range reg.Active() {
		b := briefs[id.NodeID]
		r := briefListRow{Name: id.Name, NodeID: id.NodeID}
		r.Outcome, r.FailedLines = eligibility(b)
		if b != nil {
			at := b.Time.UTC().Truncate(time.Second)
			r.Time = &at
		}
		rows = append(rows, r)
	}
	return printBriefList(env.Stdio.Out, rows, f)
}

// briefListRow is one node in brief list, and in its --json.
type briefListRow struct {
	Name        string         `json:"name"`
	NodeID      string         `json:"node_id"`
	Time        *time.Time     `json:"time"` // null: no briefing yet
	Outcome     string         `json:"outcome"`
	FailedLines []outcome.Line `json:"failed_lines"`
}

// briefListJSONVersion is the version of `brief list --json`.
const briefListJSONVersion = 1

// briefListJSON is the document of `brief list --json`.
type briefListJSON struct {
	Version   int            `json:"version"`
	Briefings []briefListRow `json:"briefings"`
}

func printBriefList(w io.Writer, rows []briefListRow, f format) error {
	switch f {
	case jsonFormat:
		return writeJSON(w, briefListJSON{briefListJSONVersion, rows})
	case tableFormat:
		var t [][]string
		for _, r := range rows {
			out := r.Outcome
			if len(r.FailedLines) > 0 {
				out += ": " + linesText(r.FailedLines, "; ")
			}
			briefed := ""
			if r.Time != nil {
				briefed = r.Time.Format("2006-01-02 15:04")
			}
			t = append(t, []string{r.Name, shortID(r.NodeID), briefed, out})
		}
		return writeTable(w, []column{{title: "NODE"}, {title: "IDENTITY"}, {title: "BRIEFED (UTC)"}, {title: "OUTCOME", shorten: true}}, t)
	}
	var cells [][]string
	for _, r := range rows {
		cells = append(cells, []string{r.Name, r.Outcome})
	}
	for i, line := range alignRows(cells) {
		r := rows[i]
		fmt.Fprintln(w, line)
		for _, l := range r.FailedLines {
			writeFailedLine(w, l)
		}
	}
	return nil
}
