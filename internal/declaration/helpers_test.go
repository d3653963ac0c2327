package declaration

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// parseFiles writes files into a fresh directory, so that `source =`
// finds them, and parses those ending in .toml in name order.
func parseFiles(t testing.TB, files map[string]string) (*Declaration, []Problem) {
	t.Helper()
	return Parse(writeSources(t, files))
}

func writeSources(t testing.TB, files map[string]string) []Source {
	t.Helper()
	dir := t.TempDir()
	var names []string
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(name, ".toml") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var srcs []Source
	for _, name := range names {
		srcs = append(srcs, Source{Name: name, Data: []byte(files[name]), Dir: dir})
	}
	return srcs
}

func problemLines(ps []Problem) string {
	var b strings.Builder
	for _, p := range ps {
		if p.Warning {
			b.WriteString("(warning) ")
		}
		b.WriteString(p.String())
		b.WriteString("\n")
	}
	return b.String()
}

func mustParse(t testing.TB, files map[string]string) *Declaration {
	t.Helper()
	d, problems := parseFiles(t, files)
	if d == nil || HasErrors(problems) {
		t.Fatalf("declaration does not parse:\n%s", problemLines(problems))
	}
	return d
}
