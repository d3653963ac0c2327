package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/pflag"
)

// "Did you mean": a mistyped command or flag is a usage error whose hint
// names the commands or flags it was probably meant to be.

// suggest returns the candidates close to word: those it is a prefix of,
// or a few edits away from (a third of its length, at least one).
func suggest(word string, candidates []string) []string {
	var out []string
	for _, c := range candidates {
		d := editDistance(word, c)
		if (len(word) >= 2 && strings.HasPrefix(c, word)) || d <= max(1, len(word)/3) {
			out = append(out, c)
		}
	}
	return out
}

// didYouMean is the hint for word, mistyped for one of candidates (or
// meant as one of also), with the help to see: "did you mean report? see:
// muster help".
func didYouMean(word string, candidates []string, helpCmd string, also ...string) string {
	s := append(also, suggest(word, candidates)...)
	if len(s) == 0 {
		return "see: " + helpCmd
	}
	if len(s) > 1 {
		s = []string{strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]}
	}
	return fmt.Sprintf("did you mean %s? see: %s", s[0], helpCmd)
}

// unknownFlag is the usage error for a flag fs does not have, with a hint
// naming the flags it was probably meant to be; any other parse error is
// a usage error with the help to see.
func unknownFlag(err error, fs *pflag.FlagSet, helpCmd string) error {
	var ne *pflag.NotExistError
	if !errors.As(err, &ne) || ne.GetSpecifiedName() == "" {
		return usageError(err.Error(), helpCmd)
	}
	var names []string
	fs.VisitAll(func(f *pflag.Flag) { names = append(names, "--"+f.Name) })
	return withHint(err.Error(), didYouMean("--"+ne.GetSpecifiedName(), names, helpCmd))
}

// subcommandsNamed are the full names of the subcommands in cs named
// word: "muster sync" was meant as "spool sync".
func subcommandsNamed(cs []*Command, word string) []string {
	var out []string
	for _, c := range cs {
		for _, s := range c.Sub {
			if s.Name == word {
				out = append(out, s.Path())
			}
			out = append(out, subcommandsNamed([]*Command{s}, word)...)
		}
	}
	return out
}

// commandNames are the names of cs.
func commandNames(cs []*Command) []string {
	var names []string
	for _, c := range cs {
		names = append(names, c.Name)
	}
	return names
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
