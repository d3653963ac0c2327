package cli

import (
	"io"
	"strings"
	"unicode/utf8"
)

// muster's messages and the details hosts report use a few characters
// beyond ASCII (→ for a change, ≠ for a mismatch, … for text left out).
// Under a locale that is not UTF-8 (LANG=C, a cron job, a serial console)
// they would show as mojibake, so the text muster writes for people is
// given in ASCII there. Data for machines (--json, --toml) is written as
// it is: JSON and TOML are UTF-8 whatever the locale.

// asciiFor spells each character muster writes beyond ASCII in ASCII.
var asciiFor = strings.NewReplacer(
	"→", "->",
	"≠", "!=",
	"…", "...",
	"—", "--",
	"–", "-",
	"‘", "'", "’", "'",
	"“", `"`, "”", `"`,
)

// utf8Locale reports whether the locale getenv describes is UTF-8: the
// first of LC_ALL, LC_CTYPE and LANG that is set decides, as in C.
func utf8Locale(getenv func(string) string) bool {
	for _, k := range []string{"LC_ALL", "LC_CTYPE", "LANG"} {
		if v := getenv(k); v != "" {
			v = strings.ToLower(v)
			return strings.Contains(v, "utf-8") || strings.Contains(v, "utf8")
		}
	}
	return false
}

// asciiWriter writes text for people with asciiFor's spellings. A
// character split between two writes is held back until it is whole.
type asciiWriter struct {
	w     io.Writer
	carry []byte
}

func (a *asciiWriter) Write(p []byte) (int, error) {
	buf := append(a.carry, p...)
	a.carry = nil
	// Hold back an incomplete character at the end.
	for i := len(buf) - 1; i >= 0 && i >= len(buf)-utf8.UTFMax; i-- {
		if utf8.RuneStart(buf[i]) {
			if !utf8.FullRune(buf[i:]) {
				a.carry = append([]byte(nil), buf[i:]...)
				buf = buf[:i]
			}
			break
		}
	}
	if _, err := io.WriteString(a.w, asciiFor.Replace(string(buf))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// raw is the writer under w for data that is written as it is.
func raw(w io.Writer) io.Writer {
	if a, ok := w.(*asciiWriter); ok {
		return a.w
	}
	return w
}

// ellipsisFor is the ellipsis a table written to w uses.
func ellipsisFor(w io.Writer) string {
	if _, ok := w.(*asciiWriter); ok {
		return "..."
	}
	return "…"
}
