package cli

import (
	"bytes"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"

	"golang.org/x/term"
)

// Tables for people (--table, report --history): one line per row, the
// columns aligned by text/tabwriter, the whole table fitted to the
// terminal's width, or to defaultWidth when stdout is not a terminal. Text
// too long for its column is shortened in the middle with an ellipsis, at
// a space or a path's slash where it can be: a word or a path is never cut
// in the middle while a shorter form fits. --json, and report NODE, give
// every text whole.

// defaultWidth is the width of a table written anywhere but a terminal.
const defaultWidth = 80

// column is one column of a table for people.
type column struct {
	title string
	// shorten says the column's text may be shortened to fit (a reason,
	// a path, labels); a column without it is always shown whole.
	shorten bool
}

// minShortened is the narrowest a shortened column is made, so that
// what is left of its text still says something.
const minShortened = 16

// columnGap is the space between two columns.
const columnGap = 2

// writeTable writes a table for people to w, fitted to w's width.
func writeTable(w io.Writer, cols []column, rows [][]string) error {
	return fitTable(w, screenWidth(w), ellipsisFor(w), cols, rows)
}

// screenWidth is the width of the terminal w writes to, or defaultWidth
// when it is not one.
func screenWidth(w io.Writer) int {
	if a, ok := w.(*asciiWriter); ok {
		w = a.w
	}
	if f, ok := w.(*os.File); ok {
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 0 {
			return cols
		}
	}
	return defaultWidth
}

// fitTable writes the table in width columns, shortening the text of
// the columns that may be shortened with ell in the middle. Only fixed
// columns wider than width together make a line longer than width.
func fitTable(w io.Writer, width int, ell string, cols []column, rows [][]string) error {
	cells := make([][]string, len(rows))
	for i, r := range rows {
		cells[i] = make([]string, len(cols))
		for j := range cols {
			if j < len(r) {
				cells[i][j] = oneLine(r[j])
			}
		}
	}
	widths := columnWidths(width, cols, cells)
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, columnGap, ' ', 0)
	line := func(cs []string) {
		for j, c := range cs {
			if j > 0 {
				io.WriteString(tw, "\t")
			}
			if cols[j].shorten {
				c = shortenMiddle(c, widths[j], ell)
			}
			io.WriteString(tw, c)
		}
		io.WriteString(tw, "\n")
	}
	titles := make([]string, len(cols))
	for j, c := range cols {
		titles[j] = c.title
	}
	line(titles)
	for _, r := range cells {
		line(r)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// A row whose last cells are empty would end in padding.
	var out strings.Builder
	for _, l := range strings.SplitAfter(buf.String(), "\n") {
		if l != "" {
			out.WriteString(strings.TrimRight(l, " \n") + "\n")
		}
	}
	_, err := io.WriteString(w, out.String())
	return err
}

// columnWidths gives each column its widest cell, then narrows the
// columns that may be shortened, widest first, until the table fits in
// width or each is at its minimum.
func columnWidths(width int, cols []column, cells [][]string) []int {
	natural := make([]int, len(cols))
	for j, c := range cols {
		natural[j] = runes(c.title)
		for _, r := range cells {
			natural[j] = max(natural[j], runes(r[j]))
		}
	}
	avail := width - columnGap*(len(cols)-1)
	var flexible []int
	for j, c := range cols {
		if c.shorten {
			flexible = append(flexible, j)
		} else {
			avail -= natural[j]
		}
	}
	// The largest limit under which the flexible columns fit in what the
	// fixed ones leave, each keeping its title and minShortened where
	// there is room for that, and its title where not.
	fit := func(floor func(natural int, c column) int) ([]int, bool) {
		limit := 0
		for _, j := range flexible {
			limit = max(limit, natural[j])
		}
		widths := append([]int(nil), natural...)
		for {
			n := 0
			for _, j := range flexible {
				widths[j] = max(min(natural[j], limit), floor(natural[j], cols[j]))
				n += widths[j]
			}
			if n <= avail {
				return widths, true
			}
			if limit == 0 {
				return widths, false
			}
			limit--
		}
	}
	widths, ok := fit(func(natural int, c column) int { return min(natural, max(runes(c.title), minShortened)) })
	if !ok {
		widths, _ = fit(func(natural int, c column) int { return min(natural, max(runes(c.title), 5)) })
	}
	return widths
}

// shortenMiddle returns s in at most width characters: whole if it fits;
// else with its long paths shortened to their first and last parts; else
// with the words of its middle left out for ell, keeping its beginning
// (what failed) and its end; and only when one word is longer than width,
// with the middle of that word left out.
func shortenMiddle(s string, width int, ell string) string {
	if runes(s) <= width {
		return s
	}
	words := strings.Split(s, " ")
	// Long paths first, longest first, each to its first and last parts.
	for runes(strings.Join(words, " ")) > width {
		longest, n := -1, 0
		for i, wd := range words {
			if strings.Count(wd, "/") >= 3 && !strings.Contains(wd, ell) && runes(wd) > n {
				longest, n = i, runes(wd)
			}
		}
		if longest < 0 {
			break
		}
		words[longest] = shortenPath(words[longest], ell)
	}
	if t := strings.Join(words, " "); runes(t) <= width {
		return t
	}
	// Then whole words out of the middle: the beginning (what failed)
	// gets its first word and up to two thirds of the room, the end what
	// is left, the beginning any rest.
	// used counts a space after each word: the two around the ellipsis.
	gap := " " + ell + " "
	room := width - runes(ell)
	head, tail := 0, len(words)
	used := func(from, to int) int {
		n := 0
		for _, wd := range words[from:to] {
			n += runes(wd) + 1
		}
		return n
	}
	if used(0, 1) <= room {
		head = 1
	}
	for head > 0 && head < tail && used(0, head+1) <= room*2/3 {
		head++
	}
	for tail > head && used(0, head)+used(tail-1, len(words)) <= room {
		tail--
	}
	for head < tail && used(0, head+1)+used(tail, len(words)) <= room {
		head++
	}
	if head > 0 {
		out := strings.Join(words[:head], " ") + gap + strings.Join(words[tail:], " ")
		return strings.TrimRight(out, " ")
	}
	// The first word alone is too long: cut inside it, keeping its two
	// ends.
	return cutMiddle(s, width, ell)
}

// shortenPath shortens a path to its first part and its last two:
// /var/lib/muster/state/outbox becomes /var/…/state/outbox.
func shortenPath(p, ell string) string {
	parts := strings.Split(p, "/")
	if len(parts) < 5 {
		return p
	}
	keep := append([]string{}, parts[:2]...)
	keep = append(keep, ell)
	keep = append(keep, parts[len(parts)-2:]...)
	return strings.Join(keep, "/")
}

// cutMiddle keeps the beginning and the end of s around ell, in width
// characters.
func cutMiddle(s string, width int, ell string) string {
	r := []rune(s)
	keep := width - runes(ell)
	if keep < 2 {
		return string(r[:max(width, 0)])
	}
	front := (keep + 1) / 2
	return string(r[:front]) + ell + string(r[len(r)-(keep-front):])
}

// oneLine makes a cell one line: a line break or a tab (a host's reason
// may hold either) becomes a space.
func oneLine(s string) string {
	if !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	return strings.Join(strings.FieldsFunc(s, unicode.IsControl), " ")
}

func runes(s string) int { return utf8.RuneCountInString(s) }

// alignRows aligns rows in columns two spaces apart, with no padding at
// the end of a line, for the plain output of a list whose rows have lines
// of their own below them (a table's rows are fitted by writeTable).
func alignRows(rows [][]string) []string {
	var widths []int
	for _, r := range rows {
		for j, c := range r {
			if j == len(widths) {
				widths = append(widths, 0)
			}
			widths[j] = max(widths[j], runes(c))
		}
	}
	out := make([]string, len(rows))
	for i, r := range rows {
		var b strings.Builder
		for j, c := range r {
			if j > 0 {
				b.WriteString(strings.Repeat(" ", columnGap))
			}
			b.WriteString(c)
			if j < len(r)-1 {
				b.WriteString(strings.Repeat(" ", widths[j]-runes(c)))
			}
		}
		out[i] = strings.TrimRight(b.String(), " ")
	}
	return out
}
