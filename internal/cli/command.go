package cli

import (
	"io"
	"strings"

	"github.com/spf13/pflag"
)

// Command is one verb (or a group of verbs such as "enrol"): what help
// and the man pages say of it, the flags it takes and the function that
// runs it. Each cmd_<verb>.go file builds its commands; commands lists
// them.
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
	// Flags adds the command's own flags to fs, bound to the fields of
	// the options struct its constructor made for this invocation; nil
	// when it has none.
	Flags func(fs *pflag.FlagSet)
	// Run runs the command on its positional arguments once the flags
	// are parsed: a call of the command's named run function. A group
	// without Run needs a subcommand.
	Run func(env *Env, args []string) error
	// Sub holds the subcommands of a group.
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
		cmdCompletion(),
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

// runnable reports whether the command runs itself; a group that does not
// needs a subcommand.
func (c *Command) runnable() bool { return c.Run != nil }

// flagSet is the command's flag set: the shared settings it takes, stored
// in g, then --help and its own flags, in the order help lists them.
func (c *Command) flagSet(g *Globals) *pflag.FlagSet {
	fs := pflag.NewFlagSet("muster "+c.Path(), pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SortFlags = false
	addGlobalFlags(fs, g, c.Global, c.HostConfig)
	fs.BoolP("help", "h", false, "show this help")
	if c.Flags != nil {
		c.Flags(fs)
	}
	return fs
}

// flagSpec is one flag of a command as its help shows it and as a shell
// completion offers it.
type flagSpec struct {
	Name      string // the long name, without dashes
	Shorthand string // the one-letter name, or ""
	// Value names what the flag takes, as help shows it: FILE, DIR,
	// SPOOL, N, DURATION...; "" for a switch.
	Value string
	// Type is the Go type of the value as pflag names it: bool, string,
	// int, uint, duration, stringArray (a flag that repeats).
	Type    string
	Usage   string // what it does
	Default string // the default help shows, or ""
	// Choices are the values the flag takes when they are a few words
	// (the annotation choicesAnnotation), for the completions.
	Choices []string
}

// choicesAnnotation marks a flag whose value is one of a few words:
// fs.SetAnnotation(name, choicesAnnotation, words).
const choicesAnnotation = "choices"

// flags lists the command's flags in the order its help shows them.
func (c *Command) flags() []flagSpec {
	return flagSpecs(c.flagSet(&Globals{Config: DefaultConfig, State: DefaultState}))
}

// flagSpecs lists the flags of fs in the order they were added.
func flagSpecs(fs *pflag.FlagSet) []flagSpec {
	var specs []flagSpec
	fs.VisitAll(func(f *pflag.Flag) {
		value, usage := pflag.UnquoteUsage(f)
		if f.Value.Type() == "bool" {
			value = ""
		} else if value == "" {
			value = "VALUE"
		}
		def := f.DefValue
		if def == "false" || def == "[]" || def == "0s" {
			def = ""
		}
		specs = append(specs, flagSpec{Name: f.Name, Shorthand: f.Shorthand, Value: strings.ToUpper(value),
			Type: f.Value.Type(), Usage: usage, Default: def, Choices: f.Annotations[choicesAnnotation]})
	})
	return specs
}
