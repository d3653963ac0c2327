package declaration

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Problem is one thing wrong with a declaration. Validation collects every
// problem instead of stopping at the first, so an operator fixes them all
// in one round.
type Problem struct {
	// File is the declaration file's name as given ("<stdin>" for "-").
	File string
	// Line is 1-based; 0 when unknown.
	Line int
	// Key is the TOML key at fault, such as role.web.file."/etc/motd".mode.
	Key string
	// Message says what is wrong, lowercase, never quoting file content.
	Message string
	// Warning problems do not stop a declaration from being committed.
	Warning bool
}

// String formats the problem as FILE:LINE: KEY: MESSAGE, leaving out the
// parts that are unknown.
func (p Problem) String() string {
	var b strings.Builder
	if p.File != "" {
		b.WriteString(p.File)
		if p.Line > 0 {
			b.WriteString(":")
			b.WriteString(strconv.Itoa(p.Line))
		}
		b.WriteString(": ")
	}
	if p.Key != "" {
		b.WriteString(p.Key)
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// HasErrors reports whether any problem is an error rather than a warning.
func HasErrors(problems []Problem) bool {
	for _, p := range problems {
		if !p.Warning {
			return true
		}
	}
	return false
}

// SortProblems orders problems by file, then line, so they read like a
// compiler's output; key and message break ties to keep the order stable.
func SortProblems(ps []Problem) { sortProblems(ps) }

func sortProblems(ps []Problem) {
	sort.SliceStable(ps, func(i, j int) bool {
		a, b := ps[i], ps[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Key != b.Key {
			return a.Key < b.Key
		}
		return a.Message < b.Message
	})
}

// place is where something was declared.
type place struct {
	file string
	line int
}

func (p place) String() string {
	if p.line > 0 {
		return fmt.Sprintf("%s:%d", p.file, p.line)
	}
	return p.file
}
