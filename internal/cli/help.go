package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

func printOverview(w io.Writer, cmds []*Command) {
	fmt.Fprintf(w, "muster declares desired state once and lets every host apply it, verify it\nand report.\n\n")
	fmt.Fprintf(w, "usage: muster [--spool SPOOL] [--mesh DIR] COMMAND [options] [args]\n\ncommands:\n")
	var lines []string
	for _, c := range cmds {
		if len(c.Sub) > 0 {
			if c.runnable() {
				lines = append(lines, hangingWrap(fmt.Sprintf("  %-16s %s", c.Name, c.Short), 19))
			}
			for _, s := range c.Sub {
				lines = append(lines, hangingWrap(fmt.Sprintf("  %-16s %s", c.Name+" "+s.Name, s.Short), 19))
			}
			continue
		}
		lines = append(lines, hangingWrap(fmt.Sprintf("  %-16s %s", c.Name, c.Short), 19))
	}
	fmt.Fprintln(w, strings.Join(lines, "\n"))
	fmt.Fprintf(w, "\nRun 'muster help COMMAND' or 'muster COMMAND --help' for details, and see\nmuster(1).\n")
	fmt.Fprintf(w, "\nexit status:\n")
	for _, e := range exitStatus {
		fmt.Fprintln(w, exitLine(e.Code, e.Meaning))
	}
}

// helpWidth is the widest line help prints: it fits a terminal of 80
// columns.
const helpWidth = 79

// hangingWrap breaks line at spaces so that no line is wider than
// helpWidth, indenting the lines after the first by indent spaces.
func hangingWrap(line string, indent int) string {
	return wrapWords("", strings.Split(line, " "), indent)
}

// wrapWords joins words with spaces after lead, breaking the line where
// the next word would pass helpWidth and indenting the lines after the
// first by indent spaces. A word wider than the room is left whole.
func wrapWords(lead string, words []string, indent int) string {
	var b strings.Builder
	b.WriteString(lead)
	col := len([]rune(lead))
	for i, word := range words {
		n := len([]rune(word))
		switch {
		case i == 0:
		case col+1+n > helpWidth && col > indent:
			b.WriteString("\n" + strings.Repeat(" ", indent))
			col = indent
			if word == "" {
				continue
			}
		default:
			b.WriteByte(' ')
			col++
		}
		b.WriteString(word)
		col += n
	}
	return b.String()
}

// usageWords splits a usage line at the spaces outside brackets, so that
// "[--timeout DURATION]" stays on one line.
func usageWords(usage string) []string {
	var words []string
	depth, start := 0, 0
	for i, r := range usage {
		switch r {
		case '[':
			depth++
		case ']':
			depth--
		case ' ':
			if depth == 0 {
				words = append(words, usage[start:i])
				start = i + 1
			}
		}
	}
	return append(words, usage[start:])
}

func exitLine(code int, meaning string) string {
	return hangingWrap(fmt.Sprintf("  %d  %s", code, meaning), 5)
}

func printGroupUsage(w io.Writer, c *Command) {
	fmt.Fprintf(w, "usage: muster %s COMMAND\n\n%s\n\ncommands:\n", c.Path(), strings.TrimSpace(c.Long))
	for _, s := range c.Sub {
		fmt.Fprintln(w, hangingWrap(fmt.Sprintf("  %-10s %s", s.Name, s.Short), 13))
	}
}

func printHelp(w io.Writer, c *Command) {
	if !c.runnable() {
		printGroupUsage(w, c)
		fmt.Fprintf(w, "\nRun 'muster %s COMMAND --help' for details.\n", c.Path())
		return
	}
	// Each form of the usage on lines of its own, broken between
	// bracketed options and indented past the command's name.
	var usage []string
	for i, form := range strings.Split(strings.TrimSpace(c.Usage), "\n") {
		lead := "usage: "
		if i > 0 {
			lead = "       "
		}
		usage = append(usage, wrapWords(lead, usageWords(form), len("usage: muster "+c.Path()+" ")))
	}
	fmt.Fprintf(w, "%s\n\n%s\n", strings.Join(usage, "\n"), strings.TrimSpace(c.Long))
	if u := flagUsages(c.flags()); u != "" {
		fmt.Fprintf(w, "\noptions:\n%s", u)
	}
	if c.Examples != "" {
		fmt.Fprintf(w, "\nexamples:\n")
		for _, l := range strings.Split(strings.TrimSpace(c.Examples), "\n") {
			if l == "" {
				fmt.Fprintln(w)
				continue
			}
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
	fmt.Fprintf(w, "\nexit status:\n")
	codes := append([]int{ExitOK}, c.Exits...)
	sort.Ints(codes)
	for _, e := range exitStatus {
		for _, code := range codes {
			if code == e.Code {
				fmt.Fprintln(w, exitLine(e.Code, e.Meaning))
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
		b.WriteString(hangingWrap(fmt.Sprintf("%-*s  %s", width, r.left, r.right), width+2) + "\n")
	}
	return b.String()
}
