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
// Messages are lowercase and have no trailing period, one line each: what
// they quote (a store's answer, a path, a host's words) goes through
// outcome.Printable. Data goes to stdout, messages to stderr.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/outcome"
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

// RootDir is the directory the host's files are under: --root, or /.
func (g *Globals) RootDir() string {
	if g.Root == "" {
		return "/"
	}
	return g.Root
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
	say(e.Stdio.Err, "warning", fmt.Sprintf(format, args...))
}

// Errorf prints an error that does not stop the command (one of several
// it names), and Hintf what to do about it.
func (e *Env) Errorf(format string, args ...any) {
	say(e.Stdio.Err, "error", fmt.Sprintf(format, args...))
}

func (e *Env) Hintf(format string, args ...any) {
	say(e.Stdio.Err, "hint", fmt.Sprintf(format, args...))
}

// say writes a message of kind (error, hint, warning) in the house style,
// on one line whatever it quotes.
func say(w io.Writer, kind, msg string) {
	fmt.Fprintf(w, "muster: %s: %s\n", kind, outcome.Printable(msg))
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

// Main runs muster with args (without the program name) and returns the exit
// status.
func Main(ctx context.Context, args []string, stdio Stdio) int {
	g := &Globals{
		Spool:  os.Getenv("MUSTER_SPOOL"),
		Mesh:   os.Getenv("MUSTER_MESH"),
		Config: DefaultConfig,
		State:  DefaultState,
	}
	if !utf8Locale(os.Getenv) {
		stdio.Out = &asciiWriter{w: stdio.Out}
		stdio.Err = &asciiWriter{w: stdio.Err}
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
		say(stderr, "error", err.Error())
	}
	if h := fault.HintOf(err); h != "" {
		say(stderr, "hint", h)
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
			fs.StringVar(&g.Root, "root", g.Root, "apply everything inside directory `DIR` instead of / (or the root the host config records)")
		}
		if hostConfig && (w == "spool" || w == "state") {
			// The host config wins over the environment and the
			// built-in default: neither is a default to show.
			fs.Lookup(w).DefValue = ""
		}
	}
}

var allGlobals = []string{"spool", "mesh", "config", "state", "root"}

// rootFlagSet is the flags that may come before the command: every
// shared setting, stored in g, --help and --version.
func rootFlagSet(g *Globals) *pflag.FlagSet {
	root := pflag.NewFlagSet("muster", pflag.ContinueOnError)
	root.SetInterspersed(false)
	root.SetOutput(io.Discard)
	addGlobalFlags(root, g, allGlobals, false)
	root.BoolP("help", "h", false, "show help")
	root.Bool("version", false, "print the version")
	return root
}

func run(env *Env, args []string) error {
	cmds := commands()
	root := rootFlagSet(env.Global)
	if err := root.Parse(args); err != nil {
		return unknownFlag(err, root, "muster help")
	}
	if v, _ := root.GetBool("version"); v {
		fmt.Fprintf(env.Stdio.Out, "muster %s\n", Version())
		return nil
	}
	args = root.Args()
	help, _ := root.GetBool("help")
	if help || len(args) == 0 {
		if len(args) == 0 && !help {
			printOverview(env.Stdio.Err, cmds)
			return quietly(fault.Usage)
		}
		printOverview(env.Stdio.Out, cmds)
		return nil
	}
	cmd := findCommand(cmds, args[0])
	if cmd == nil {
		return withHint(fmt.Sprintf("unknown command %q", args[0]), didYouMean(args[0], commandNames(cmds), "muster help", subcommandsNamed(cmds, args[0])...))
	}
	args = args[1:]
	for len(cmd.Sub) > 0 {
		// A group may run itself ("muster brief") when no subcommand
		// follows.
		if cmd.runnable() && (len(args) == 0 || strings.HasPrefix(args[0], "-")) {
			break
		}
		if len(args) == 0 {
			printGroupUsage(env.Stdio.Err, cmd)
			return fault.Usagef("muster %s needs a subcommand", cmd.Path())
		}
		if args[0] == "help" || (!cmd.runnable() && (args[0] == "--help" || args[0] == "-h")) {
			printHelp(env.Stdio.Out, cmd)
			return nil
		}
		sub := findCommand(cmd.Sub, args[0])
		if sub == nil {
			return withHint(fmt.Sprintf("unknown command %q for muster %s", args[0], cmd.Path()),
				didYouMean(args[0], commandNames(cmd.Sub), "muster help "+cmd.Path()))
		}
		cmd, args = sub, args[1:]
	}
	fs := cmd.flagSet(env.Global)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			printHelp(env.Stdio.Out, cmd)
			return nil
		}
		return unknownFlag(err, fs, "muster help "+cmd.Path())
	}
	if h, _ := fs.GetBool("help"); h {
		printHelp(env.Stdio.Out, cmd)
		return nil
	}
	env.flags = fs
	return cmd.Run(env, fs.Args())
}

func usageError(msg, helpCmd string) error {
	return withHint(msg, "see: "+helpCmd)
}

// withHint is a usage error with a hint.
func withHint(msg, hint string) error {
	return fault.WithHint(fault.Usagef("%s", msg), hint)
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
