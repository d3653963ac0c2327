// Package cli is the only package that knows the terminal: flags, usage
// text, tables, standard streams and exit statuses live here. Every command
// below it takes readers, writers, paths and a context and returns errors.
//
// Message style, for every line muster writes to stderr:
//
//	muster: error: <what went wrong, naming the file:line, object, node or generation>
//	muster: hint: <what to do about it>
//	muster: warning: <something the user should know that did not stop the command>
//
// Messages are lowercase and have no trailing period. Data goes to stdout,
// messages to stderr.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/muster-tool/muster/internal/fault"
)

// Stdio is the standard streams a command uses.
type Stdio struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
}

// Globals are the settings shared by many commands, from flags and the
// environment.
type Globals struct {
	Spool  string // --spool, MUSTER_SPOOL
	Mesh   string // --mesh, MUSTER_MESH
	Config string // --config
	State  string // --state
	Root   string // --root
}

// Default host-side paths.
const (
	DefaultConfig = "/etc/muster/muster.toml"
	DefaultState  = "/var/lib/muster"
)

// Env is what a running command sees.
type Env struct {
	Ctx    context.Context
	Stdio  Stdio
	Global *Globals
	Now    func() time.Time
	// set records which flags were given on the command line.
	flags *pflag.FlagSet
}

// Warnf prints a warning line.
func (e *Env) Warnf(format string, args ...any) {
	fmt.Fprintf(e.Stdio.Err, "muster: warning: "+format+"\n", args...)
}

// Warn prints each warning.
func (e *Env) Warn(ws []string) {
	for _, w := range ws {
		e.Warnf("%s", w)
	}
}

// Changed reports whether the named flag was given.
func (e *Env) Changed(name string) bool {
	return e.flags != nil && e.flags.Changed(name)
}

// Command is one verb (or a group of verbs such as "enrol").
type Command struct {
	Name  string // "init"; for a subcommand, its own word ("issue")
	Usage string // the usage line(s) without the leading "usage: "
	Short string // one line for the command list
	Long  string // what it does, what it reads and writes by default
	// Examples are shell lines, each with an optional "# comment" line
	// before it.
	Examples string
	// Global lists the shared settings the command takes: "spool",
	// "mesh", "config", "state", "root".
	Global []string
	// HostConfig says the command takes its spool and state directory from
	// the host config, so --spool and --state override the config and
	// neither the environment nor a built-in default applies.
	HostConfig bool
	// Exits lists the exit statuses the command can return besides 0.
	Exits []int
	// Setup builds a fresh options struct for one invocation, adds its
	// flags to fs, and returns the function that runs the command.
	Setup func(fs *pflag.FlagSet) func(env *Env, args []string) error
	// Sub holds the subcommands of a group; a group has no Setup.
	Sub []*Command
	// parent is set for subcommands.
	parent *Command
}

// Path is the full command name, such as "enrol issue".
func (c *Command) Path() string {
	if c.parent != nil {
		return c.parent.Path() + " " + c.Name
	}
	return c.Name
}

// commands is muster's command table, in the order help lists it. Help,
// the man page tests and the shell completions all read it; a command
// exists when it is listed here. It is built afresh for each invocation.
func commands() []*Command {
	cmds := []*Command{
		cmdInit(),
		cmdVersion(),
		cmdHelp(),
		cmdApply(),
		cmdBrief(),
		cmdDeclare(),
		cmdEnrol(),
		cmdReport(),
		cmdSpool(),
	}
	var link func(c *Command)
	link = func(c *Command) {
		for _, s := range c.Sub {
			s.parent = c
			link(s)
		}
	}
	for _, c := range cmds {
		link(c)
	}
	return cmds
}

func findCommand(cmds []*Command, name string) *Command {
	for _, c := range cmds {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// Main runs muster with args (without the program name) and returns the exit
// status.
func Main(ctx context.Context, args []string, stdio Stdio) int {
	g := &Globals{
		Spool:  os.Getenv("MUSTER_SPOOL"),
		Mesh:   os.Getenv("MUSTER_MESH"),
		Config: DefaultConfig,
		State:  DefaultState,
	}
	env := &Env{Ctx: ctx, Stdio: stdio, Global: g, Now: time.Now}
	err := run(env, args)
	return finish(stdio.Err, stoppedBySignal(ctx, err))
}

// stoppedBySignal makes the error of a command that a signal stopped (ctx was
// cancelled: see cmd/muster) a temporary failure saying so. A command
// that finished before it noticed the signal, or failed for a reason of
// its own, keeps its result.
func stoppedBySignal(ctx context.Context, err error) error {
	if ctx.Err() == nil || !errors.Is(err, context.Canceled) {
		return err
	}
	msg := fmt.Sprintf("interrupted (%v)", context.Cause(ctx))
	if err.Error() != context.Canceled.Error() {
		msg += ": " + err.Error()
	}
	return fault.WithHint(fault.New(fault.Temporary, errors.New(msg)), "run the command again")
}

// finish prints err in the house style and returns its exit status.
func finish(stderr io.Writer, err error) int {
	if err == nil {
		return ExitOK
	}
	code := exitCode(err)
	var silent *silentError
	if !errors.As(err, &silent) {
		fmt.Fprintf(stderr, "muster: error: %s\n", err)
	}
	if h := fault.HintOf(err); h != "" {
		fmt.Fprintf(stderr, "muster: hint: %s\n", h)
	}
	return code
}

// silentError carries an exit status for a command that has already said
// everything it has to say (report --fail-on, apply with failed lines, or
// a restart after an upgrade, which is no failure at all).
type silentError struct{ code int }

func (e *silentError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// quietly returns an error that prints nothing and exits with the status
// of class c.
func quietly(c fault.Class) error { return &silentError{code: classCode(c)} }

// exitQuietly returns an error that prints nothing and exits with code.
func exitQuietly(code int) error { return &silentError{code: code} }

// closing returns an error of class c whose message is the one line that
// closes details the command printed already.
func closing(c fault.Class, msg string) error {
	return fault.New(c, errors.New(msg))
}

func addGlobalFlags(fs *pflag.FlagSet, g *Globals, which []string, hostConfig bool) {
	for _, w := range which {
		switch w {
		case "spool":
			usage := "the spool `SPOOL`: a directory or s3://bucket/prefix, with parameters such as endpoint= and timeout= (muster-spool(5); env MUSTER_SPOOL)"
			if hostConfig {
				usage = "the spool `SPOOL` instead of the host config's"
			}
			fs.StringVar(&g.Spool, "spool", g.Spool, usage)
		case "state":
			usage := "the host state directory `DIR`"
			if hostConfig {
				usage += " instead of the host config's"
			}
			fs.StringVar(&g.State, "state", g.State, usage)
		case "mesh":
			fs.StringVar(&g.Mesh, "mesh", g.Mesh, "the mesh key directory `DIR` (env MUSTER_MESH)")
		case "config":
			fs.StringVar(&g.Config, "config", g.Config, "the host config `FILE`")
		case "root":
			fs.StringVar(&g.Root, "root", g.Root, "apply everything inside directory `DIR` instead of /")
		}
		if hostConfig && (w == "spool" || w == "state") {
			// The host config wins over the environment and the
			// built-in default: neither is a default to show.
			fs.Lookup(w).DefValue = ""
		}
	}
}

var allGlobals = []string{"spool", "mesh", "config", "state", "root"}

func run(env *Env, args []string) error {
	cmds := commands()
	// Global flags may come before the verb.
	root := pflag.NewFlagSet("muster", pflag.ContinueOnError)
	root.SetInterspersed(false)
	root.SetOutput(io.Discard)
	addGlobalFlags(root, env.Global, allGlobals, false)
	help := root.BoolP("help", "h", false, "show help")
	showVersion := root.Bool("version", false, "print the version")
	if err := root.Parse(args); err != nil {
		return usageError(err.Error(), "muster help")
	}
	if *showVersion {
		fmt.Fprintf(env.Stdio.Out, "muster %s\n", Version())
		return nil
	}
	args = root.Args()
	if *help || len(args) == 0 {
		if len(args) == 0 && !*help {
			printOverview(env.Stdio.Err, cmds)
			return quietly(fault.Usage)
		}
		printOverview(env.Stdio.Out, cmds)
		return nil
	}
	cmd := findCommand(cmds, args[0])
	if cmd == nil {
		return usageError(fmt.Sprintf("unknown command %q", args[0]), "muster help")
	}
	args = args[1:]
	for len(cmd.Sub) > 0 {
		// A group may run itself ("muster brief") when no subcommand
		// follows.
		if cmd.Setup != nil && (len(args) == 0 || strings.HasPrefix(args[0], "-")) {
			break
		}
		if len(args) == 0 {
			printGroupUsage(env.Stdio.Err, cmd)
			return fault.Usagef("muster %s needs a subcommand", cmd.Path())
		}
		if args[0] == "help" || (cmd.Setup == nil && (args[0] == "--help" || args[0] == "-h")) {
			printHelp(env.Stdio.Out, cmd)
			return nil
		}
		sub := findCommand(cmd.Sub, args[0])
		if sub == nil {
			return usageError(fmt.Sprintf("unknown command %q for muster %s", args[0], cmd.Path()), "muster help "+cmd.Path())
		}
		cmd, args = sub, args[1:]
	}
	fs := newFlagSet(cmd, env.Global)
	runFn := cmd.Setup(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			printHelp(env.Stdio.Out, cmd)
			return nil
		}
		return usageError(err.Error(), "muster help "+cmd.Path())
	}
	if h, _ := fs.GetBool("help"); h {
		printHelp(env.Stdio.Out, cmd)
		return nil
	}
	env.flags = fs
	return runFn(env, fs.Args())
}

func newFlagSet(cmd *Command, g *Globals) *pflag.FlagSet {
	fs := pflag.NewFlagSet("muster "+cmd.Path(), pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SortFlags = false
	addGlobalFlags(fs, g, cmd.Global, cmd.HostConfig)
	fs.BoolP("help", "h", false, "show this help")
	return fs
}

func usageError(msg, helpCmd string) error {
	return fault.WithHint(fault.Usagef("%s", msg), "see: "+helpCmd)
}

// needArgs checks the number of positional arguments.
func needArgs(args []string, min, max int, what string) error {
	if len(args) < min {
		return fault.Usagef("missing %s", what)
	}
	if max >= 0 && len(args) > max {
		return fault.Usagef("unexpected argument %q", args[max])
	}
	return nil
}

func printOverview(w io.Writer, cmds []*Command) {
	fmt.Fprintf(w, "muster declares desired state once and lets every host apply it, verify it and report.\n\n")
	fmt.Fprintf(w, "usage: muster [--spool SPOOL] [--mesh DIR] COMMAND [options] [args]\n\ncommands:\n")
	var lines []string
	for _, c := range cmds {
		if len(c.Sub) > 0 {
			if c.Setup != nil {
				lines = append(lines, fmt.Sprintf("  %-16s %s", c.Name, c.Short))
			}
			for _, s := range c.Sub {
				lines = append(lines, fmt.Sprintf("  %-16s %s", c.Name+" "+s.Name, s.Short))
			}
			continue
		}
		lines = append(lines, fmt.Sprintf("  %-16s %s", c.Name, c.Short))
	}
	fmt.Fprintln(w, strings.Join(lines, "\n"))
	fmt.Fprintf(w, "\nRun 'muster help COMMAND' or 'muster COMMAND --help' for details, and see muster(1).\n")
	fmt.Fprintf(w, "\nexit status:\n")
	for _, e := range exitStatus {
		fmt.Fprintf(w, "  %d  %s\n", e.Code, e.Meaning)
	}
}

func printGroupUsage(w io.Writer, c *Command) {
	fmt.Fprintf(w, "usage: muster %s COMMAND\n\n%s\n\ncommands:\n", c.Path(), strings.TrimSpace(c.Long))
	for _, s := range c.Sub {
		fmt.Fprintf(w, "  %-10s %s\n", s.Name, s.Short)
	}
}

func printHelp(w io.Writer, c *Command) {
	if len(c.Sub) > 0 && c.Setup == nil {
		printGroupUsage(w, c)
		fmt.Fprintf(w, "\nRun 'muster %s COMMAND --help' for details.\n", c.Path())
		return
	}
	fmt.Fprintf(w, "usage: %s\n\n%s\n", strings.ReplaceAll(strings.TrimSpace(c.Usage), "\n", "\n       "), strings.TrimSpace(c.Long))
	fs := newFlagSet(c, &Globals{Config: DefaultConfig, State: DefaultState})
	c.Setup(fs)
	if u := flagUsages(fs); u != "" {
		fmt.Fprintf(w, "\noptions:\n%s", u)
	}
	if c.Examples != "" {
		fmt.Fprintf(w, "\nexamples:\n")
		for _, l := range strings.Split(strings.TrimSpace(c.Examples), "\n") {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
	fmt.Fprintf(w, "\nexit status:\n")
	codes := append([]int{ExitOK}, c.Exits...)
	sort.Ints(codes)
	for _, e := range exitStatus {
		for _, code := range codes {
			if code == e.Code {
				fmt.Fprintf(w, "  %d  %s\n", e.Code, e.Meaning)
			}
		}
	}
	page := "muster-" + strings.SplitN(c.Path(), " ", 2)[0]
	fmt.Fprintf(w, "\nsee %s(1)\n", page)
}

// flagUsages lists a command's options, one per line, the way its man page
// does: "--name VALUE  what it does (default ...)".
func flagUsages(fs *pflag.FlagSet) string {
	type row struct{ left, right string }
	var rows []row
	width := 0
	fs.VisitAll(func(f *pflag.Flag) {
		left := "  "
		if f.Shorthand != "" {
			left += "-" + f.Shorthand + ", "
		} else {
			left += "    "
		}
		left += "--" + f.Name
		varname, usage := pflag.UnquoteUsage(f)
		if f.Value.Type() != "bool" {
			if varname == "" {
				varname = "VALUE"
			}
			left += " " + strings.ToUpper(varname)
		}
		if d := f.DefValue; d != "" && d != "false" && d != "[]" && d != "0s" {
			usage += " (default " + d + ")"
		}
		if len(left) > width {
			width = len(left)
		}
		rows = append(rows, row{left, usage})
	})
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "%-*s  %s\n", width, r.left, r.right)
	}
	return b.String()
}
