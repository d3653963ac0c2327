package cli

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/muster-tool/muster/internal/enrol"
	"github.com/muster-tool/muster/internal/fault"
)

// completionOptions are the flags of muster completion.
type completionOptions struct {
	Nodes bool
}

func (o *completionOptions) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.Nodes, "node-names", false, "print the enrolled node names, one a line, for the completions (reads the mesh's registry only)")
}

func cmdCompletion() *Command {
	var o completionOptions
	return &Command{
		Name:  "completion",
		Usage: "muster completion bash | zsh | fish\nmuster completion --node-names",
		Short: "print the shell completion for bash, zsh or fish",
		Long: `Print the completion script for a shell on stdout: the commands, their
subcommands and flags, the files, directories or words a flag takes, and
node names where a command takes one. It is made from the same command
table as --help, so it offers what this muster has. The Debian package
installs all three.

Node names come from 'muster completion --node-names', which the scripts run
with the mesh and spool given on the line being completed (or
MUSTER_MESH), for at most two seconds: it reads the mesh's registry of
enrolled nodes, no briefing and no report, and prints nothing when there is
no mesh.`,
		Examples: `# bash, for this shell
source <(muster completion bash)
# bash, for every shell of this user
muster completion bash > ~/.local/share/bash-completion/completions/muster
# zsh: a directory in $fpath
muster completion zsh > ~/.zfunc/_muster
# fish
muster completion fish > ~/.config/fish/completions/muster.fish`,
		Global: []string{"mesh", "spool"},
		Exits:  []int{ExitFailure, ExitUsage},
		Flags:  o.addFlags,
		Run:    func(env *Env, args []string) error { return runCompletion(env, o, args) },
	}
}

// runCompletion prints the completion script for a shell, or with
// --node-names the enrolled node names.
func runCompletion(env *Env, o completionOptions, args []string) error {
	if o.Nodes {
		if err := needArgs(args, 0, 0, ""); err != nil {
			return err
		}
		return printNodeNames(env)
	}
	if err := needArgs(args, 1, 1, "shell: bash, zsh or fish"); err != nil {
		return err
	}
	w := raw(env.Stdio.Out)
	switch args[0] {
	case "bash":
		writeBash(w, completeTable())
	case "zsh":
		writeZsh(w, completeTable())
	case "fish":
		writeFish(w, completeTable())
	default:
		return fault.Usagef("no completion for shell %q: want bash, zsh or fish", args[0])
	}
	return nil
}

// printNodeNames prints the names of the nodes enrolled now, from the
// registry alone, and writes nothing: the shell runs it on a keystroke.
func printNodeNames(env *Env) error {
	m, err := openMesh(env)
	if err != nil {
		return err
	}
	reg, err := enrol.ReadRegistry(env.Ctx, m)
	if err != nil {
		return err
	}
	for _, id := range reg.Active() {
		fmt.Fprintln(env.Stdio.Out, id.Name)
	}
	return nil
}
