package cli

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/muster-tool/muster/internal/brief"
	"github.com/muster-tool/muster/internal/enrol"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/gcpace"
	"github.com/muster-tool/muster/internal/outcome"
)

func cmdEnrol() *Command {
	return &Command{
		Name:  "enrol",
		Short: "enrol hosts: issue and cancel tokens, admit, label, revoke, list, join",
		Long: `Enrolment decides which host identities the mesh trusts. The operator issues
a token for a node name; the host joins with it; the mesh admits the join
request (declare does this too; report and the other read-only commands never
do).`,
		Sub: []*Command{cmdEnrolIssue(), cmdEnrolCancel(), cmdEnrolAdmit(), cmdEnrolLabel(), cmdEnrolRevoke(), cmdEnrolList(), cmdEnrolJoin()},
	}
}

func sortStrings(s []string) { sort.Strings(s) }

// enrolIssueOptions are the flags of muster enrol issue.
type enrolIssueOptions struct {
	Reenrol bool
	Expires time.Duration
	Labels  []string
}

func (o *enrolIssueOptions) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.Reenrol, "reenrol", false, "re-enrol a node that is already enrolled (revokes its identity on admission)")
	o.Expires = enrol.DefaultExpiry
	fs.Var((*daysFlag)(&o.Expires), "expires", "how long the token stays valid, such as 24h or 7d")
	fs.StringArrayVar(&o.Labels, "label", nil, "a label `KEY=VALUE` for the node (repeatable)")
}

func cmdEnrolIssue() *Command {
	var o enrolIssueOptions
	return &Command{
		Name:  "issue",
		Usage: "muster enrol issue NAME [--reenrol] [--expires DURATION] [--label KEY=VALUE]...",
		Short: "issue a one-time enrolment token for a node name",
		Long: `Print a one-time enrolment token for node NAME on stdout. The token is shown
once: the spool keeps only a verifier, never the token, so no command can
print it again. Carry it by hand to the host and give it to
'muster enrol join' on standard input.

The token is one line under 200 characters starting with MUSTER-JOIN- and
carries a checksum, so a mistyped token is caught before anything is sent. It
holds the node name, a one-time proof key, the fingerprint of the mesh's
public keys (the host pins them) and the expiry.

A token for a name that is already enrolled must be issued with --reenrol:
admitting it revokes the previous identity. Whether a token is a re-enrolment
is fixed here and cannot be changed by the host. Pending join requests are
admitted first, so a host that has joined counts as enrolled.`,
		Examples: `# a token valid for one day, for a web server
muster enrol issue web-1 --expires 24h --label role=web > web-1.token

# a rebuilt host keeps its name; its old identity is revoked on admission
muster enrol issue web-1 --reenrol`,
		Global: []string{"mesh", "spool"},
		Exits:  []int{ExitFailure, ExitUsage, ExitRefused, ExitTemporary},
		Flags:  o.addFlags,
		Run:    func(env *Env, args []string) error { return runEnrolIssue(env, o, args) },
	}
}

// runEnrolIssue prints a one-time enrolment token for a node name.
func runEnrolIssue(env *Env, o enrolIssueOptions, args []string) error {
	if err := needArgs(args, 1, 1, "node NAME"); err != nil {
		return err
	}
	lm, err := parseLabels(o.Labels, "--label ")
	if err != nil {
		return err
	}
	m, reg, err := openAdmitted(env)
	if err != nil {
		return err
	}
	tok, err := enrol.Issue(env.Ctx, m, reg, enrol.IssueOptions{Name: args[0], Reenrol: o.Reenrol, Expires: o.Expires, Labels: lm, Now: env.Now(),
		Warn: func(w string) { env.Warnf("%s", w) }})
	if err != nil {
		return err
	}
	fmt.Fprintln(env.Stdio.Out, tok.String())
	kind := "token"
	if o.Reenrol {
		kind = "re-enrolment token"
	}
	fmt.Fprintf(env.Stdio.Err, "muster: %s for %s issued (id %s); valid until %s; it is shown only this once\n", kind, args[0], tok.ID(), tok.Expires.Format(time.RFC3339))
	return nil
}

// enrolCancelOptions are the flags of muster enrol cancel.
type enrolCancelOptions struct {
	Token  string
	Reason string
}

func (o *enrolCancelOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Token, "token", "", "cancel only the token whose id is or starts with `ID`")
	fs.StringVar(&o.Reason, "reason", "", "why, as `TEXT` kept with the cancellation and given to the hosts it refuses")
}

func cmdEnrolCancel() *Command {
	var o enrolCancelOptions
	return &Command{
		Name:  "cancel",
		Usage: "muster enrol cancel NAME [--token ID] [--reason TEXT]",
		Short: "cancel enrolment tokens no host has used yet",
		Long: `Cancel every token issued for node NAME that no host has used yet, or only
the token whose id is or starts with ID, with --token (enrol issue prints the
id, enrol list the ids of the tokens not used yet). A cancelled
token can never be admitted: the cancellation is written where the token's
admission would be, with the same single write that makes a token
single-use, so of a cancel and an admit at the same moment exactly one
stands, and this command says which. A host that joined with the token
and was not admitted yet is refused by the next admit.

Cancel admits nothing first: a join request waiting for a token you are
cancelling is never admitted.

Each cancelled token is printed on stdout. A token already cancelled or
expired is left as it is and said so on stderr. A token a host has already
used cannot be cancelled: that host is enrolled. While its identity is
trusted, the command exits with the refusal status and names the identity
to revoke.`,
		Examples: `# the stick with web-1's token was lost on the way
muster enrol cancel web-1 --reason 'token lost in transit'
# cancel one of two tokens issued for web-1
muster enrol cancel web-1 --token 3f9c1d0e6b2a48d7a1c5e0f4b7d9a2c6`,
		Global: []string{"mesh", "spool"},
		Exits:  []int{ExitFailure, ExitUsage, ExitRefused, ExitTemporary},
		Flags:  o.addFlags,
		Run:    func(env *Env, args []string) error { return runEnrolCancel(env, o, args) },
	}
}

// runEnrolCancel cancels the tokens for a node name that no host has used yet.
func runEnrolCancel(env *Env, o enrolCancelOptions, args []string) error {
	if err := needArgs(args, 1, 1, "node NAME"); err != nil {
		return err
	}
	m, err := openMesh(env)
	if err != nil {
		return err
	}
	res, err := enrol.Cancel(env.Ctx, m, enrol.CancelOptions{Name: args[0], TokenID: o.Token, Reason: o.Reason, Now: env.Now()})
	if err != nil {
		return err
	}
	for _, is := range res.Cancelled {
		fmt.Fprintf(env.Stdio.Out, "cancelled token %s for %s (issued %s, valid until %s)\n",
			is.TokenID, is.Name, is.IssuedAt.Format(time.RFC3339), is.Expires.Format(time.RFC3339))
	}
	used := false
	for _, s := range res.Spent {
		if s.Admitted != nil {
			used = true
			env.Errorf("token %s for %s cannot be cancelled: %s", s.Token.TokenID, s.Token.Name, s.Reason)
			env.Hintf("to refuse that host from now on: muster enrol revoke %s", s.Token.Name)
			continue
		}
		env.Warnf("token %s for %s left as it is: %s", s.Token.TokenID, s.Token.Name, s.Reason)
	}
	if used {
		return quietly(fault.Refused)
	}
	return nil
}

func cmdEnrolAdmit() *Command {
	return &Command{
		Name:  "admit",
		Usage: "muster enrol admit",
		Short: "admit pending join requests",
		Long: `Admit every pending join request in the spool. Each is checked: the proof was
made with the token it names, the token was issued by this mesh, has not
expired and was not used before, a plain token does not take over an enrolled
name, and the host keys can be trusted (an age key of low order, or a signing
key of small order, is refused, naming it). Admitting a re-enrolment revokes
the previous identity at that moment. Each admission is one atomic write, so
nothing is ever half-admitted; each refusal is printed with its reason and
recorded, so it is decided once.

'muster declare' and 'muster report' admit pending requests themselves.`,
		Examples: "muster enrol admit",
		Global:   []string{"mesh", "spool"},
		Exits:    []int{ExitFailure, ExitUsage, ExitRefused, ExitTemporary},
		Run:      runEnrolAdmit,
	}
}

// runEnrolAdmit admits every pending join request, or says why not.
func runEnrolAdmit(env *Env, args []string) error {
	if err := needArgs(args, 0, 0, ""); err != nil {
		return err
	}
	m, err := openMesh(env)
	if err != nil {
		return err
	}
	// Admitting opens a join request and seals a decision for every
	// request, and keeps little of either: garbage at once, as in report.
	gcpace.ForReading()
	res, reg, err := enrol.Admit(env.Ctx, m, env.Now())
	if err != nil {
		return err
	}
	env.Warn(reg.Warnings)
	env.Warn(reg.Skipped)
	for _, a := range res.Admitted {
		fmt.Fprintf(env.Stdio.Out, "admitted %s as identity %s%s\n", a.Name, a.NodeID, replacesNote(a.Replaces))
	}
	for _, r := range res.Refused {
		env.Errorf("%s", r)
	}
	if len(res.Admitted) == 0 && len(res.Refused) == 0 {
		fmt.Fprintln(env.Stdio.Out, "no pending join requests")
	}
	if len(res.Refused) > 0 {
		return quietly(fault.Refused)
	}
	return nil
}

// parseLabels parses KEY=VALUE label arguments; what names where they
// were given, for the error.
func parseLabels(args []string, what string) (map[string]string, error) {
	lm := map[string]string{}
	for _, l := range args {
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			return nil, fault.Usagef("%s%q: want KEY=VALUE", what, l)
		}
		if prev, dup := lm[k]; dup && prev != v {
			return nil, fault.Usagef("label %s is given twice, as %s and %s: give one", k, prev, v)
		}
		lm[k] = v
	}
	return lm, nil
}

// enrolLabelOptions are the flags of muster enrol label.
type enrolLabelOptions struct {
	Remove []string
}

func (o *enrolLabelOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringArrayVar(&o.Remove, "remove", nil, "remove the label `KEY` (repeatable)")
}

func cmdEnrolLabel() *Command {
	var o enrolLabelOptions
	return &Command{
		Name:  "label",
		Usage: "muster enrol label NAME [KEY=VALUE]... [--remove KEY]...",
		Short: "change an enrolled node's labels without re-enrolling it",
		Long: `Set the labels KEY=VALUE of node NAME, replacing the value a key had, and
remove the labels given with --remove. The other labels stay. The change is
one record signed by the mesh in the spool; from then on declare selects
roles by the new labels and renders templates ({{ .Labels.KEY }}) with them,
enrol list shows them, and a re-enrolment of the node keeps them (unless
its token was issued with labels of its own). Hosts need nothing: the
labels are the mesh's, and the next declare writes what they select.

Keys and values are 1 to 63 letters, digits, '-', '_' or '.'. The node's
labels after the change are printed on stdout. A change that leaves them
as they are writes nothing and says so; removing a label the node does not
have is a warning. A node that is not enrolled, or whose identity is
revoked, is refused. Pending join requests are admitted first.

A label record in the spool that is not signed by the mesh key is skipped
with a warning naming it, and never applied.`,
		Examples: `# web-1 moves to the db role, selected by labels = { role = "db" }
muster enrol label web-1 role=db
muster declare site.toml
# drop a label, set another
muster enrol label web-1 site=fra --remove canary`,
		Global: []string{"mesh", "spool"},
		Exits:  []int{ExitFailure, ExitUsage, ExitRefused, ExitTemporary},
		Flags:  o.addFlags,
		Run:    func(env *Env, args []string) error { return runEnrolLabel(env, o, args) },
	}
}

// runEnrolLabel changes the labels of an enrolled node.
func runEnrolLabel(env *Env, o enrolLabelOptions, args []string) error {
	if err := needArgs(args, 1, -1, "node NAME"); err != nil {
		return err
	}
	set, err := parseLabels(args[1:], "label ")
	if err != nil {
		return err
	}
	m, reg, err := openAdmitted(env)
	if err != nil {
		return err
	}
	res, err := enrol.Label(env.Ctx, m, reg, enrol.LabelOptions{Name: args[0], Set: set, Remove: o.Remove, Now: env.Now()})
	if err != nil {
		return err
	}
	id := res.Identity
	for _, k := range res.Absent {
		env.Warnf("%s has no label %s to remove", id.Name, k)
	}
	labels := labelsString(id.Labels)
	if labels == "" {
		labels = "none"
	}
	if !res.Changed {
		fmt.Fprintf(env.Stdio.Out, "labels of %s unchanged: %s\n", id.Name, labels)
		return nil
	}
	fmt.Fprintf(env.Stdio.Out, "labels of %s (identity %s): %s\n", id.Name, id.NodeID, labels)
	return nil
}

// enrolRevokeOptions are the flags of muster enrol revoke.
type enrolRevokeOptions struct {
	Reason string
}

func (o *enrolRevokeOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Reason, "reason", "decommissioned", "why, as `TEXT` kept with the revocation")
}

func cmdEnrolRevoke() *Command {
	var o enrolRevokeOptions
	return &Command{
		Name:  "revoke",
		Usage: "muster enrol revoke NAME [--reason TEXT]",
		Short: "decommission a node: its identity is refused from then on",
		Long: `Revoke the current identity of node NAME. From then on its briefings and
reports are refused and declare encrypts nothing to it. To bring the host
back, issue it a new token. A token for the name that no host has used yet
would enrol it again: each is named in a warning.`,
		Examples: "muster enrol revoke web-1 --reason 'disk replaced, host rebuilt elsewhere'",
		Global:   []string{"mesh", "spool"},
		Exits:    []int{ExitFailure, ExitUsage, ExitRefused, ExitTemporary},
		Flags:    o.addFlags,
		Run:      func(env *Env, args []string) error { return runEnrolRevoke(env, o, args) },
	}
}

// runEnrolRevoke revokes the current identity of a node.
func runEnrolRevoke(env *Env, o enrolRevokeOptions, args []string) error {
	if err := needArgs(args, 1, 1, "node NAME"); err != nil {
		return err
	}
	m, reg, err := openAdmitted(env)
	if err != nil {
		return err
	}
	id, err := enrol.Revoke(env.Ctx, m, reg, args[0], o.Reason, env.Now())
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdio.Out, "revoked %s (identity %s)\n", id.Name, id.NodeID)
	// A decommissioned name is free for a new token, so a
	// token still on its way would enrol it again.
	unused, err := enrol.UnusedTokens(env.Ctx, m, reg, env.Now())
	if err != nil {
		return err
	}
	for _, is := range unused {
		if is.Name == id.Name {
			env.Warnf("token %s for %s is unused and would enrol %s again; if it should not: muster enrol cancel %s --token %s",
				is.TokenID, is.Name, is.Name, is.Name, is.TokenID)
		}
	}
	return nil
}

// listJSONVersion is the version of `enrol list --json`.
const listJSONVersion = 1

// listJSON is the document of `enrol list --json`.
type listJSON struct {
	Version int         `json:"version"`
	Nodes   []listNode  `json:"nodes"`
	Tokens  []listToken `json:"tokens"`
}

type listNode struct {
	Name        string            `json:"name"`
	NodeID      string            `json:"node_id"`     // "": decommissioned
	EnrolledAt  *time.Time        `json:"enrolled_at"` // null: decommissioned
	Labels      map[string]string `json:"labels"`
	Eligibility string            `json:"eligibility"`
	FailedLines []outcome.Line    `json:"failed_lines"`
	Revoked     []listRevoked     `json:"revoked"`
}

type listRevoked struct {
	NodeID    string    `json:"node_id"`
	RevokedAt time.Time `json:"revoked_at"`
	Reason    string    `json:"reason"`
}

// listToken is a token that could still admit a host.
type listToken struct {
	TokenID  string    `json:"token_id"`
	Name     string    `json:"name"`
	Reenrol  bool      `json:"reenrol"`
	IssuedAt time.Time `json:"issued_at"`
	Expires  time.Time `json:"expires"`
}

// enrolListOptions are the flags of muster enrol list.
type enrolListOptions struct {
	Output output
}

func (o *enrolListOptions) addFlags(fs *pflag.FlagSet) {
	o.Output.addFlags(fs, tableFlag, jsonFlag)
}

func cmdEnrolList() *Command {
	var o enrolListOptions
	return &Command{
		Name:  "list",
		Usage: "muster enrol list [--table | --json]",
		Short: "list enrolled nodes, their eligibility and revoked identities, and unused tokens",
		Long: `List every node ever enrolled: name, identity fingerprint, when it was
enrolled, labels, eligibility computed from its newest briefing (eligible,
ineligible, decommissioned, or no briefing yet), and its revoked identities
with dates. Then list the tokens that could still admit a host: issued, not
used, not cancelled and not expired (see 'muster enrol cancel'). Pending join
requests are admitted first.

--json output is versioned: {"version": 1, "nodes": [{"name", "node_id",
"enrolled_at", "labels", "eligibility", "failed_lines", "revoked": [{"node_id",
"revoked_at", "reason"}]}], "tokens": [{"token_id", "name", "reenrol",
"issued_at", "expires"}]}.`,
		Examples: "muster enrol list --table\nmuster enrol list --json |\n  jq -r '.nodes[] | select(.eligibility == \"ineligible\") | .name'",
		Global:   []string{"mesh", "spool"},
		Exits:    []int{ExitFailure, ExitUsage, ExitRefused, ExitTemporary},
		Flags:    o.addFlags,
		Run:      func(env *Env, args []string) error { return runEnrolList(env, o, args) },
	}
}

// runEnrolList lists every node ever enrolled and the tokens that could still
// admit a host.
func runEnrolList(env *Env, o enrolListOptions, args []string) error {
	if err := needArgs(args, 0, 0, ""); err != nil {
		return err
	}
	f, err := o.Output.chosen()
	if err != nil {
		return err
	}
	m, reg, briefs, err := openFleet(env)
	if err != nil {
		return err
	}
	unused, err := enrol.UnusedTokens(env.Ctx, m, reg, env.Now())
	if err != nil {
		return err
	}
	tokens := []listToken{}
	for _, is := range unused {
		tokens = append(tokens, listToken{is.TokenID, is.Name, is.Reenrol, is.IssuedAt, is.Expires})
	}
	return printList(env.Stdio.Out, listNodes(reg, briefs), tokens, f)
}

// listNodes is every node ever enrolled, with its eligibility computed from
// its newest briefing in briefs.
func listNodes(reg *enrol.Registry, briefs map[string]*brief.Briefing) []listNode {
	var nodes []listNode
	for _, name := range reg.Names() {
		n := reg.Nodes[name]
		ln := listNode{Name: name}
		for _, p := range n.Past {
			ln.Revoked = append(ln.Revoked, listRevoked{p.NodeID, p.RevokedAt, p.RevokeReason})
		}
		if c := n.Current; c != nil {
			if c.Revoked() {
				ln.Revoked = append(ln.Revoked, listRevoked{c.NodeID, c.RevokedAt, c.RevokeReason})
				ln.Eligibility = "decommissioned"
			} else {
				at := c.AdmittedAt
				ln.NodeID, ln.EnrolledAt, ln.Labels = c.NodeID, &at, c.Labels
				ln.Eligibility, ln.FailedLines = eligibility(briefs[c.NodeID])
			}
		}
		nodes = append(nodes, ln)
	}
	return nodes
}

func printList(w io.Writer, nodes []listNode, tokens []listToken, f format) error {
	if f == jsonFormat {
		return writeJSON(w, listJSON{listJSONVersion, nodes, tokens})
	}
	table := f == tableFormat
	if err := printNodes(w, nodes, table); err != nil {
		return err
	}
	return printTokens(w, tokens, table)
}

// printTokens lists the tokens that could still admit a host.
func printTokens(w io.Writer, tokens []listToken, table bool) error {
	if len(tokens) == 0 {
		return nil
	}
	kind := func(t listToken) string {
		if t.Reenrol {
			return "re-enrolment"
		}
		return "plain"
	}
	fmt.Fprintln(w)
	if table {
		var rows [][]string
		for _, t := range tokens {
			rows = append(rows, []string{shortID(t.TokenID), t.Name, kind(t), t.IssuedAt.UTC().Format("2006-01-02 15:04"), t.Expires.UTC().Format("2006-01-02 15:04")})
		}
		return writeTable(w, []column{{title: "UNUSED TOKEN"}, {title: "NODE"}, {title: "KIND"}, {title: "ISSUED (UTC)"}, {title: "VALID UNTIL (UTC)"}}, rows)
	}
	for _, t := range tokens {
		fmt.Fprintf(w, "token %s for %s not used yet: %s, issued %s, valid until %s\n", t.TokenID, t.Name, kind(t),
			t.IssuedAt.UTC().Format(time.RFC3339), t.Expires.UTC().Format(time.RFC3339))
	}
	return nil
}

// printNodes lists the nodes for people.
func printNodes(w io.Writer, nodes []listNode, table bool) error {
	if table {
		var rows [][]string
		for _, n := range nodes {
			enrolled := ""
			if n.EnrolledAt != nil {
				enrolled = n.EnrolledAt.UTC().Format("2006-01-02")
			}
			status := n.Eligibility
			if len(n.FailedLines) > 0 {
				status += ": " + linesText(n.FailedLines, "; ")
			}
			rows = append(rows, []string{n.Name, shortID(n.NodeID), enrolled, labelsString(n.Labels), revokedText(n.Revoked), status})
		}
		return writeTable(w, []column{{title: "NODE"}, {title: "IDENTITY"}, {title: "ENROLLED"}, {title: "LABELS", shorten: true},
			{title: "REVOKED"}, {title: "ELIGIBILITY", shorten: true}}, rows)
	}
	if len(nodes) == 0 {
		fmt.Fprintln(w, "no nodes enrolled")
		return nil
	}
	var rows [][]string
	for _, n := range nodes {
		rows = append(rows, []string{n.Name, orDash(n.NodeID), n.Eligibility, labelsString(n.Labels)})
	}
	for i, line := range alignRows(rows) {
		n := nodes[i]
		fmt.Fprintln(w, line)
		for _, l := range n.FailedLines {
			writeFailedLine(w, l)
		}
		for _, r := range n.Revoked {
			fmt.Fprintf(w, "  revoked %s at %s: %s\n", r.NodeID, r.RevokedAt.UTC().Format(time.RFC3339), r.Reason)
		}
	}
	return nil
}

// revokedText sums up a node's revoked identities in one short cell: the
// date of the newest revocation, and how many there were before it.
func revokedText(rev []listRevoked) string {
	if len(rev) == 0 {
		return ""
	}
	newest := rev[0].RevokedAt
	for _, r := range rev {
		if r.RevokedAt.After(newest) {
			newest = r.RevokedAt
		}
	}
	s := newest.UTC().Format("2006-01-02")
	if len(rev) > 1 {
		s += fmt.Sprintf(" (+%d)", len(rev)-1)
	}
	return s
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// enrolJoinOptions are the flags of muster enrol join.
type enrolJoinOptions struct {
	TokenFile string
	Force     bool
}

func (o *enrolJoinOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.TokenFile, "token-file", "", "read the token from `FILE` instead of standard input")
	fs.BoolVar(&o.Force, "force", false, "replace an identity already in the state directory")
}

func cmdEnrolJoin() *Command {
	var o enrolJoinOptions
	return &Command{
		Name:  "join",
		Usage: "muster enrol join --spool SPOOL [--token-file FILE] [--force] < TOKEN",
		Short: "join this host to the mesh with a token (host side)",
		Long: `Join this host to the mesh. The token is read from standard input, or from
--token-file; never from the command line, where shell history and ps would
keep it. On a terminal it asks for the token and reads one line without
echoing it. Whitespace around a pasted token is ignored.

join checks the token's checksum and expiry, reads the mesh's public keys from
the spool and pins them only if they match the fingerprint the token carries
and can be trusted (a signing key of small order, or an age key of low order,
is refused), creates the host's key pair in the state directory (keys 0600,
directory 0700), writes the host config (--config: spool, node name, state
directory), runs and sends a briefing, and writes the join request, signed by
the host key and by the token's proof and encrypted to the mesh. The mesh
admits it on its next admit or declare.

A host config that already exists at --config (written ahead of enrolment,
for example to set briefing thresholds) keeps its settings: join fills in the
spool, node name and state directory, and uses its spool when --spool is not
given.

Joining over a state directory that already holds an identity is refused
unless --force. If join fails, the host is left as it was: the identity and
config it wrote are removed, and with --force the old identity is put back.`,
		Examples: `# paste the token when asked, then Ctrl-D
muster enrol join --spool /mnt/spool
# or from a file carried on a USB stick
muster enrol join --spool s3://fleet/spool \
  --token-file /media/usb/web-1.token`,
		Global: []string{"spool", "config", "state", "root"},
		Exits:  []int{ExitFailure, ExitUsage, ExitRefused, ExitTemporary},
		Flags:  o.addFlags,
		Run:    func(env *Env, args []string) error { return runEnrolJoin(env, o, args) },
	}
}

// runEnrolJoin joins this host to the mesh with a token read from standard
// input or --token-file.
func runEnrolJoin(env *Env, o enrolJoinOptions, args []string) error {
	if err := needArgs(args, 0, 0, ""); err != nil {
		return fault.WithHint(err, "the token is read from standard input or --token-file, never from the command line")
	}
	var raw []byte
	var err error
	switch {
	case o.TokenFile != "" && o.TokenFile != "-":
		raw, err = os.ReadFile(o.TokenFile)
	case isTerminalIn(env.Stdio.In):
		// Pasted by hand: one line, not echoed (the token is a secret
		// that would otherwise stay on the screen and in scrollback).
		fmt.Fprint(env.Stdio.Err, "paste the token and press Enter: ")
		raw, err = term.ReadPassword(int(env.Stdio.In.(*os.File).Fd()))
		fmt.Fprintln(env.Stdio.Err)
	default:
		raw, err = io.ReadAll(io.LimitReader(env.Stdio.In, 4096))
	}
	if err != nil {
		return err
	}
	if strings.TrimSpace(string(raw)) == "" {
		return fault.Usagef("no token on standard input: pipe it in or use --token-file FILE")
	}
	res, err := enrol.Join(env.Ctx, enrol.JoinOptions{
		Token: string(raw), Spool: env.Global.Spool, Config: env.Global.Config, State: env.Global.State,
		Root: env.Global.RootDir(), Force: o.Force, Version: Version(), Now: env.Now(),
	})
	if err != nil {
		return err
	}
	env.Warn(res.Warnings)
	fmt.Fprintf(env.Stdio.Out, "joined as %s (identity %s); the mesh admits it on its next admit or declare\n", res.Name, res.NodeID)
	if res.Briefing.Eligible() {
		fmt.Fprintln(env.Stdio.Out, "briefing: eligible")
	} else {
		fmt.Fprintln(env.Stdio.Out, "briefing: ineligible (the node is enrolled but gets no declaration until a briefing passes):")
		for _, l := range outcome.FailedLines(res.Briefing.Lines) {
			writeFailedLine(env.Stdio.Out, l)
		}
	}
	return nil
}
