package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

func printOverview(w io.Writer, cmds []*Command) {
	fmt.Fprintf(w, "muster declares desired state once and lets every host apply it, verify it and report.\n\n")
	fmt.Fprintf(w, "usage: muster [--spool SPOOL] [--mesh DIR] COMMAND [options] [args]\n\ncommands:\n")
	var lines []string
	for _, c := range cmds {
		if len(c.Sub) > 0 {
			if c.runnable() {
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
	if !c.runnable() {
		printGroupUsage(w, c)
		fmt.Fprintf(w, "\nRun 'muster %s COMMAND --help' for details.\n", c.Path())
		return
	}
	fmt.Fprintf(w, "usage: %s\n\n%s\n", strings.ReplaceAll(strings.TrimSpace(c.Usage), "\n", "\n       "), strings.TrimSpace(c.Long))
	if u := flagUsages(c.flags()); u != "" {
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
func flagUsages(flags []flagSpec) string {
	type row struct{ left, right string }
	var rows []row
	width := 0
	for _, f := range flags {
		left := "  "
		if f.Shorthand != "" {
			left += "-" + f.Shorthand + ", "
		} else {
			left += "    "
		}
		left += "--" + f.Name
		if f.Value != "" {
			left += " " + f.Value
		}
		usage := f.Usage
		if f.Default != "" {
			usage += " (default " + f.Default + ")"
		}
		width = max(width, len(left))
		rows = append(rows, row{left, usage})
	}
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "%-*s  %s\n", width, r.left, r.right)
	}
	return b.String()
}
