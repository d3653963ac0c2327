package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// Shell completions for bash, zsh and fish, made from the command table
// (commands and its flags) that help reads: the commands and subcommands,
// each command's flags, what each flag's value is (a file, a directory, one
// of a few words, or something to type), and what a command's arguments
// are, read from its usage line (node names, files, directories). Node names
// come from `muster completion --node-names`, which reads the mesh's registry only
// and is given two seconds.

// completeCmd is one command as the completions see it; the one with
// path "" is muster itself, before a command.
type completeCmd struct {
	path  string
	subs  []*Command
	flags []flagSpec
	args  string // what its arguments are: node, file, dir, deb, command or ""
}

// completeTable is the command table as the completions see it, muster
// itself first.
func completeTable() []completeCmd {
	root := completeCmd{subs: commands()}
	root.flags = flagSpecs(rootFlagSet(&Globals{Config: DefaultConfig, State: DefaultState}))
	out := []completeCmd{root}
	var walk func(cs []*Command)
	walk = func(cs []*Command) {
		for _, c := range cs {
			out = append(out, completeCmd{path: c.Path(), subs: c.Sub, flags: c.flags(), args: c.argKind()})
			walk(c.Sub)
		}
	}
	walk(root.subs)
	return out
}

// argKind says what the command's arguments are, from the first line of
// its usage: NODE or NAME a node name, FILE a file, SRC, DST, SPOOL or DIR
// a directory, PACKAGE.deb a package file, COMMAND a command.
func (c *Command) argKind() string {
	words := strings.Fields(strings.SplitN(c.Usage, "\n", 2)[0])
	for i := 1 + len(strings.Fields(c.Path())); i < len(words); i++ {
		w := strings.Trim(words[i], "[]|.")
		if strings.HasPrefix(w, "-") {
			// "[--json]" takes no value; "--spool SPOOL" and "[--sort
			// KEY]" do.
			if !strings.HasSuffix(words[i], "]") && i+1 < len(words) && !strings.HasPrefix(words[i+1], "[") {
				next := strings.Trim(words[i+1], "[]|.")
				if next != "" && !strings.HasPrefix(next, "-") && strings.ToUpper(next) == next {
					i++ // the flag's value
				}
			}
			continue
		}
		switch w {
		case "NODE", "NAME":
			return "node"
		case "FILE":
			return "file"
		case "SRC", "DST", "SPOOL", "DIR":
			return "dir"
		case "PACKAGE.deb":
			return "deb"
		case "COMMAND":
			return "command"
		}
	}
	return ""
}

// valueKind is what a flag's value is: "" for a switch, file, dir,
// "choices:A B C", or value (anything typed).
func (f flagSpec) valueKind() string {
	switch {
	case f.Type == "bool":
		return ""
	case len(f.Choices) > 0:
		return "choices:" + strings.Join(f.Choices, " ")
	case f.Value == "FILE":
		return "file"
	case f.Value == "DIR" || f.Value == "SPOOL":
		return "dir"
	}
	return "value"
}

// valuedFlags lists every flag, of any command, that takes a value: the
// word after it is its value, not a command. TestFlagKindsAgree keeps a
// flag name a switch everywhere or a value everywhere.
func valuedFlags(table []completeCmd) []string {
	seen := map[string]bool{}
	for _, c := range table {
		for _, f := range c.flags {
			if f.Type != "bool" {
				seen["--"+f.Name] = true
				if f.Shorthand != "" {
					seen["-"+f.Shorthand] = true
				}
			}
		}
	}
	var out []string
	for f := range seen {
		out = append(out, f)
	}
	sort.Strings(out)
	return out
}

func subNames(cs []*Command) string {
	var names []string
	for _, c := range cs {
		names = append(names, c.Name)
	}
	return strings.Join(names, " ")
}

func flagNames(fs []flagSpec) string {
	var names []string
	for _, f := range fs {
		names = append(names, "--"+f.Name)
	}
	return strings.Join(names, " ")
}

// writeShellData writes the functions bash and zsh share: the
// subcommands, flags and argument kind of a command path, and a flag's
// value kind.
func writeShellData(w io.Writer, table []completeCmd) {
	fmt.Fprintf(w, "_muster_valued=' %s '\n\n", strings.Join(valuedFlags(table), " "))
	fmt.Fprintln(w, "# _muster_subs PATH: the subcommands of the command PATH (\"\": muster's)")
	fmt.Fprintln(w, "_muster_subs() {\n\tcase $1 in")
	for _, c := range table {
		if len(c.subs) > 0 {
			fmt.Fprintf(w, "\t%q) echo %q ;;\n", c.path, subNames(c.subs))
		}
	}
	fmt.Fprintln(w, "\tesac\n}")
	fmt.Fprintln(w, "# _muster_flags PATH: the flags of the command PATH")
	fmt.Fprintln(w, "_muster_flags() {\n\tcase $1 in")
	for _, c := range table {
		fmt.Fprintf(w, "\t%q) echo %q ;;\n", c.path, flagNames(c.flags))
	}
	fmt.Fprintln(w, "\tesac\n}")
	fmt.Fprintln(w, "# _muster_args PATH: what the arguments of the command PATH are")
	fmt.Fprintln(w, "_muster_args() {\n\tcase $1 in")
	for _, c := range table {
		if c.args != "" {
			fmt.Fprintf(w, "\t%q) echo %s ;;\n", c.path, c.args)
		}
	}
	fmt.Fprintln(w, "\tesac\n}")
	fmt.Fprintln(w, "# _muster_value PATH FLAG: what the value of FLAG of the command PATH is")
	fmt.Fprintln(w, "_muster_value() {\n\tcase \"$1 $2\" in")
	for _, c := range table {
		for _, f := range c.flags {
			if k := f.valueKind(); k != "" && k != "value" {
				fmt.Fprintf(w, "\t%q) echo %q ;;\n", strings.TrimLeft(c.path+" --"+f.Name, " "), k)
			}
		}
	}
	fmt.Fprintln(w, "\t*) echo value ;;\n\tesac\n}")
	// The path typed so far, with the flags and their values left out;
	// and the --mesh and --spool given, for the node names.
	fmt.Fprint(w, `# _muster_scan WORD...: sets _muster_path to the command typed in the
# words and _muster_mesh to the --mesh and --spool given
_muster_scan() {
	_muster_path= _muster_mesh=
	local w skip= subs
	for w in "$@"; do
		if [ -n "$skip" ]; then
			[ "$skip" = keep ] && _muster_mesh="$_muster_mesh $w"
			skip=
			continue
		fi
		case $w in
		--mesh=* | --spool=*) _muster_mesh="$_muster_mesh $w" ;;
		--mesh | --spool) _muster_mesh="$_muster_mesh $w" skip=keep ;;
		-*=*) ;;
		-*) case $_muster_valued in *" $w "*) skip=1 ;; esac ;;
		*)
			subs=" $(_muster_subs "$_muster_path") "
			case $subs in *" $w "*) _muster_path=${_muster_path:+$_muster_path }$w ;; esac
			;;
		esac
	done
}
`)
}

// writeBash writes the bash completion.
func writeBash(w io.Writer, table []completeCmd) {
	fmt.Fprintln(w, "# bash completion for muster; made by: muster completion bash")
	writeShellData(w, table)
	fmt.Fprint(w, `# _muster_nodes: the enrolled node names, if the mesh answers in time
_muster_nodes() {
	timeout 2 muster $_muster_mesh completion --node-names 2>/dev/null
}
_muster() {
	local cur=${COMP_WORDS[COMP_CWORD]} prev= kind
	[ "$COMP_CWORD" -gt 1 ] && prev=${COMP_WORDS[COMP_CWORD-1]}
	_muster_scan "${COMP_WORDS[@]:1:COMP_CWORD-1}"
	COMPREPLY=()
	case $prev in
	-*=* | "") ;;
	-*)
		case $_muster_valued in *" $prev "*)
			kind=$(_muster_value "$_muster_path" "$prev")
			case $kind in
			file) COMPREPLY=($(compgen -f -- "$cur")) ;;
			dir) COMPREPLY=($(compgen -d -- "$cur")) ;;
			choices:*) COMPREPLY=($(compgen -W "${kind#choices:}" -- "$cur")) ;;
			esac
			return
			;;
		esac
		;;
	esac
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$(_muster_flags "$_muster_path")" -- "$cur"))
		return
	fi
	local subs
	subs=$(_muster_subs "$_muster_path")
	if [ -n "$subs" ]; then
		COMPREPLY=($(compgen -W "$subs" -- "$cur"))
		return
	fi
	case $(_muster_args "$_muster_path") in
	node) COMPREPLY=($(compgen -W "$(_muster_nodes)" -- "$cur")) ;;
	file) COMPREPLY=($(compgen -f -- "$cur")) ;;
	dir) COMPREPLY=($(compgen -d -- "$cur")) ;;
	deb) COMPREPLY=($(compgen -f -X '!*.deb' -- "$cur") $(compgen -d -- "$cur")) ;;
	command) COMPREPLY=($(compgen -W "$(_muster_subs "")" -- "$cur")) ;;
	esac
}
complete -o filenames -F _muster muster
`)
}

// writeZsh writes the zsh completion: a #compdef file for $fpath, which
// can also be sourced.
func writeZsh(w io.Writer, table []completeCmd) {
	fmt.Fprintln(w, "#compdef muster\n# zsh completion for muster; made by: muster completion zsh")
	writeShellData(w, table)
	fmt.Fprint(w, `_muster_nodes() {
	timeout 2 muster ${=_muster_mesh} completion --node-names 2>/dev/null
}
_muster() {
	local cur=${words[CURRENT]} prev= kind subs
	(( CURRENT > 2 )) && prev=${words[CURRENT-1]}
	_muster_scan "${(@)words[2,CURRENT-1]}"
	case $prev in
	-*=* | "") ;;
	-*)
		case $_muster_valued in *" $prev "*)
			kind=$(_muster_value "$_muster_path" "$prev")
			case $kind in
			file) _files ;;
			dir) _directories ;;
			choices:*) compadd -- ${=kind#choices:} ;;
			esac
			return
			;;
		esac
		;;
	esac
	if [[ $cur == -* ]]; then
		compadd -- ${=$(_muster_flags "$_muster_path")}
		return
	fi
	subs=$(_muster_subs "$_muster_path")
	if [[ -n $subs ]]; then
		compadd -- ${=subs}
		return
	fi
	case $(_muster_args "$_muster_path") in
	node) compadd -- ${(f)"$(_muster_nodes)"} ;;
	file) _files ;;
	dir) _directories ;;
	deb) _files -g '*.deb' ;;
	command) compadd -- ${=$(_muster_subs "")} ;;
	esac
}
if [[ $funcstack[1] == _muster ]]; then
	_muster "$@"
else
	compdef _muster muster
fi
`)
}

// writeFish writes the fish completion.
func writeFish(w io.Writer, table []completeCmd) {
	fmt.Fprintln(w, "# fish completion for muster; made by: muster completion fish")
	fmt.Fprintf(w, "set -g __muster_valued %s\n", strings.Join(valuedFlags(table), " "))
	fmt.Fprintln(w, "function __muster_subs\n    switch \"$argv\"")
	for _, c := range table {
		if len(c.subs) > 0 {
			fmt.Fprintf(w, "        case %s\n            echo %s\n", fishQuote(c.path), subNames(c.subs))
		}
	}
	fmt.Fprintln(w, "    end\nend")
	fmt.Fprint(w, `# __muster_path: the command typed so far, without flags and their values
function __muster_path
    set -l path
    set -l skip 0
    for w in (commandline -opc)[2..-1]
        if test $skip = 1
            set skip 0
            continue
        end
        switch $w
            case '-*=*'
            case '-*'
                contains -- $w $__muster_valued; and set skip 1
            case '*'
                contains -- $w (string split ' ' (__muster_subs (string join ' ' $path))); and set -a path $w
        end
    end
    string join ' ' $path
end
function __muster_at
    set -l path (__muster_path)
    test "$path" = "$argv"
end
function __muster_nodes
    set -l mesh
    set -l tokens (commandline -opc)
    for i in (seq (count $tokens))
        switch $tokens[$i]
            case '--mesh=*' '--spool=*'
                set -a mesh $tokens[$i]
            case --mesh --spool
                set -a mesh $tokens[$i] $tokens[(math $i + 1)]
        end
    end
    timeout 2 muster $mesh completion --node-names 2>/dev/null
end
complete -c muster -f
`)
	for _, c := range table {
		cond := "__muster_at " + fishQuote(c.path)
		for _, s := range c.subs {
			fmt.Fprintf(w, "complete -c muster -n %s -a %s -d %s\n", fishQuote(cond), s.Name, fishQuote(s.Short))
		}
		for _, f := range c.flags {
			line := fmt.Sprintf("complete -c muster -n %s -l %s", fishQuote(cond), f.Name)
			if f.Shorthand != "" {
				line += " -s " + f.Shorthand
			}
			switch k := f.valueKind(); {
			case k == "file":
				line += " -r -F"
			case k == "dir":
				line += " -r -a '(__fish_complete_directories)'"
			case strings.HasPrefix(k, "choices:"):
				line += " -x -a " + fishQuote(strings.TrimPrefix(k, "choices:"))
			case k == "value":
				line += " -x"
			}
			fmt.Fprintf(w, "%s -d %s\n", line, fishQuote(f.Usage))
		}
		switch c.args {
		case "node":
			fmt.Fprintf(w, "complete -c muster -n %s -a '(__muster_nodes)'\n", fishQuote(cond))
		case "file", "deb":
			fmt.Fprintf(w, "complete -c muster -n %s -F\n", fishQuote(cond))
		case "dir":
			fmt.Fprintf(w, "complete -c muster -n %s -a '(__fish_complete_directories)'\n", fishQuote(cond))
		case "command":
			fmt.Fprintf(w, "complete -c muster -n %s -a %s\n", fishQuote(cond), fishQuote(subNames(commands())))
		}
	}
}

// fishQuote quotes s for fish, in single quotes.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
