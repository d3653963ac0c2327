package cli

import (
	"fmt"
	"strings"
)

func cmdHelp() *Command {
	return &Command{
		Name:  "help",
		Usage: "muster help [COMMAND [SUBCOMMAND]]",
		Short: "show help for muster or one command",
		Long: `Without arguments, list the commands and the exit statuses. With a command,
show its usage, options, examples and exit statuses; the same text as
'muster COMMAND --help'.`,
		Examples: "muster help\nmuster help enrol issue",
		Exits:    []int{ExitUsage},
		Run:      runHelp,
	}
}

// runHelp shows the overview, or the help of the command args name.
func runHelp(env *Env, args []string) error {
	cmds := commands()
	if len(args) == 0 {
		printOverview(env.Stdio.Out, cmds)
		return nil
	}
	c := findCommand(cmds, args[0])
	for i := 1; c != nil && i < len(args) && len(c.Sub) > 0; i++ {
		c = findCommand(c.Sub, args[i])
	}
	if c == nil {
		return usageError(fmt.Sprintf("unknown command %q", strings.Join(args, " ")), "muster help")
	}
	printHelp(env.Stdio.Out, c)
	return nil
}
