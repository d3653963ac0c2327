package tomlfile

import (
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// KeyLines maps each key a TOML document defines to the line defining it,
// for errors that name the line of the key at fault.
// The TOML library keeps key positions private (and gives the elements of
// an array of tables one shared entry), so this small scanner recovers
// them. It only ever sees documents the TOML parser has accepted; on
// anything it does not follow it stops, and later keys fall back to the
// line of their nearest known parent.
type KeyLines map[string]int

// Line returns the line of key, or of its nearest ancestor that has one,
// or 0.
func (k KeyLines) Line(key ...string) int {
	for n := len(key); n > 0; n-- {
		if l, ok := k[joinKey(key[:n])]; ok {
			return l
		}
	}
	return 0
}

func joinKey(key []string) string { return strings.Join(key, "\x00") }

// LocateKeys scans src, a document the TOML parser accepted, for the lines
// of its keys.
func LocateKeys(src string) KeyLines {
	sc := &keyScanner{src: src, lines: KeyLines{}}
	for i := 0; i < len(src); i++ {
		if src[i] == '\n' {
			sc.newlines = append(sc.newlines, i)
		}
	}
	sc.document()
	return sc.lines
}

type keyScanner struct {
	src      string
	i        int
	newlines []int // offsets of every '\n', to turn offsets into lines
	lines    KeyLines
}

func (sc *keyScanner) eof() bool { return sc.i >= len(sc.src) }

func (sc *keyScanner) peek() byte {
	if sc.eof() {
		return 0
	}
	return sc.src[sc.i]
}

// lineAt is the 1-based line holding offset off.
func (sc *keyScanner) lineAt(off int) int {
	return sort.SearchInts(sc.newlines, off) + 1
}

// record notes the line of key and of each of its parents not seen yet
// (a header such as [a.b.c] defines a and a.b implicitly).
func (sc *keyScanner) record(key []string, off int) {
	line := sc.lineAt(off)
	for n := 1; n <= len(key); n++ {
		k := joinKey(key[:n])
		if _, ok := sc.lines[k]; !ok {
			sc.lines[k] = line
		}
	}
}

func (sc *keyScanner) document() {
	var table []string
	for {
		sc.skipBlank()
		if sc.eof() {
			return
		}
		start := sc.i
		if sc.peek() == '[' {
			closing := "]"
			if strings.HasPrefix(sc.src[sc.i:], "[[") {
				closing = "]]"
				sc.i++
			}
			sc.i++
			key, ok := sc.key()
			if !ok {
				return
			}
			sc.skipSpace()
			if !strings.HasPrefix(sc.src[sc.i:], closing) {
				return
			}
			sc.i += len(closing)
			sc.record(key, start)
			table = key
			continue
		}
		key, ok := sc.key()
		if !ok {
			return
		}
		full := slices.Concat(table, key)
		sc.record(full, start)
		if !sc.assignment(full) {
			return
		}
	}
}

// assignment reads "= value" after a key.
func (sc *keyScanner) assignment(key []string) bool {
	sc.skipSpace()
	if sc.peek() != '=' {
		return false
	}
	sc.i++
	sc.skipSpace()
	return sc.value(key)
}

func (sc *keyScanner) value(key []string) bool {
	if sc.eof() {
		return false
	}
	switch sc.peek() {
	case '"', '\'':
		_, ok := sc.str()
		return ok
	case '[':
		return sc.list(']', func() bool { return sc.value(key) })
	case '{':
		return sc.list('}', func() bool {
			start := sc.i
			k, ok := sc.key()
			if !ok {
				return false
			}
			full := slices.Concat(key, k)
			sc.record(full, start)
			return sc.assignment(full)
		})
	}
	return sc.scalar()
}

// list reads the rest of an array or inline table after its opening
// bracket: elements read by elem, separated by commas, up to end.
func (sc *keyScanner) list(end byte, elem func() bool) bool {
	sc.i++
	for {
		sc.skipBlank()
		switch sc.peek() {
		case 0:
			return false
		case end:
			sc.i++
			return true
		case ',':
			sc.i++
			continue
		}
		if !elem() {
			return false
		}
	}
}

// scalar skips a number, boolean or date-time.
func (sc *keyScanner) scalar() bool {
	start := sc.i
	sc.bare()
	// A date and a time may be separated by one space.
	if sc.i-start == 10 && sc.src[start+4] == '-' && sc.peek() == ' ' &&
		sc.i+1 < len(sc.src) && sc.src[sc.i+1] >= '0' && sc.src[sc.i+1] <= '9' {
		sc.i++
		sc.bare()
	}
	return sc.i > start
}

func (sc *keyScanner) bare() {
	for !sc.eof() && !strings.ContainsRune(" \t\r\n,]}#[{=", rune(sc.peek())) {
		sc.i++
	}
}

func (sc *keyScanner) key() ([]string, bool) {
	var parts []string
	for {
		sc.skipSpace()
		part, ok := sc.keyPart()
		if !ok {
			return nil, false
		}
		parts = append(parts, part)
		sc.skipSpace()
		if sc.peek() != '.' {
			return parts, true
		}
		sc.i++
	}
}

func (sc *keyScanner) keyPart() (string, bool) {
	switch sc.peek() {
	case '"', '\'':
		return sc.str()
	}
	start := sc.i
	for !sc.eof() && isBareKeyByte(sc.peek()) {
		sc.i++
	}
	return sc.src[start:sc.i], sc.i > start
}

func isBareKeyByte(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// str reads any of TOML's four string forms and returns its value (fully
// unescaped only for the single-line forms keys can use).
func (sc *keyScanner) str() (string, bool) {
	q := sc.peek()
	triple := strings.Repeat(string(q), 3)
	if strings.HasPrefix(sc.src[sc.i:], triple) {
		sc.i += 3
		start := sc.i
		for !sc.eof() {
			c := sc.peek()
			if c == '\\' && q == '"' {
				sc.i += 2
				continue
			}
			if c == q && strings.HasPrefix(sc.src[sc.i:], triple) {
				// Up to two more quotes may end the content just before
				// the closing delimiter: the delimiter is the run's last three.
				run := 0
				for sc.i+run < len(sc.src) && sc.src[sc.i+run] == q {
					run++
				}
				sc.i += run
				return sc.src[start : sc.i-3], true
			}
			sc.i++
		}
		return "", false
	}
	sc.i++
	start := sc.i
	escaped := false
	for !sc.eof() {
		c := sc.peek()
		switch {
		case c == '\n':
			return "", false
		case c == '\\' && q == '"':
			escaped = true
			sc.i += 2
			continue
		case c == q:
			s := sc.src[start:sc.i]
			sc.i++
			if escaped {
				s = unescapeBasic(s)
			}
			return s, true
		}
		sc.i++
	}
	return "", false
}

// unescapeBasic decodes the escapes of a TOML basic string. Input the
// TOML parser accepted has only valid escapes; anything else is kept.
func unescapeBasic(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch s[i] {
		case 'b':
			b.WriteByte('\b')
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'f':
			b.WriteByte('\f')
		case 'r':
			b.WriteByte('\r')
		case 'e':
			b.WriteByte(0x1b)
		case '"', '\\':
			b.WriteByte(s[i])
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[s[i]]
			if i+n < len(s) {
				if v, err := strconv.ParseUint(s[i+1:i+1+n], 16, 32); err == nil && utf8.ValidRune(rune(v)) {
					b.WriteRune(rune(v))
					i += n
					continue
				}
			}
			b.WriteByte('\\')
			b.WriteByte(s[i])
		default:
			b.WriteByte('\\')
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

func (sc *keyScanner) skipSpace() {
	for c := sc.peek(); c == ' ' || c == '\t'; c = sc.peek() {
		sc.i++
	}
}

// skipBlank skips white space, newlines and comments.
func (sc *keyScanner) skipBlank() {
	for !sc.eof() {
		switch sc.peek() {
		case ' ', '\t', '\r', '\n':
			sc.i++
		case '#':
			for !sc.eof() && sc.peek() != '\n' {
				sc.i++
			}
		default:
			return
		}
	}
}
