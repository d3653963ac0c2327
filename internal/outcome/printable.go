package outcome

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Printable is s with each control character (a line break, a tab, the
// ESC that starts a terminal's escape sequence), each bidirectional
// formatting character and each byte that is not UTF-8 written as a Go
// escape (\n, \x1b, \u202e, \xff), and s itself when it has none. A host
// writes its lines' details through it, and the mesh shows a line's id
// and detail, and a briefing's facts, through it again: a host that sends
// anything else, tampered with or broken, can neither steer the terminal
// of whoever reads them, nor break a listing's one line per node to
// forge another node's, nor reorder the text shown beside them. Every
// message on standard error goes through it too, for what it quotes (see
// muster(1), QUOTED TEXT).
func Printable(s string) string { return escape(s, unprintable) }

// PrintableLine is Printable for a line of a file's text shown whole (a
// dry run's diff): its tabs stay tabs.
func PrintableLine(s string) string {
	return escape(s, func(r rune) bool { return r != '\t' && unprintable(r) })
}

func escape(s string, bad func(rune) bool) string {
	if utf8.ValidString(s) && strings.IndexFunc(s, bad) < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		c, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case bad(c):
			q := strconv.QuoteRune(c)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func unprintable(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)
}
