package declaration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/muster-tool/muster/internal/fault"
)

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.toml")
	if err := os.WriteFile(a, []byte("prune = true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srcs, err := Load([]string{a, "-"}, strings.NewReader("prune = true\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(srcs) != 2 {
		t.Fatalf("got %d sources", len(srcs))
	}
	if srcs[0].Name != a || srcs[0].Dir != dir || string(srcs[0].Data) != "prune = true\n" {
		t.Errorf("file source = %+v", srcs[0])
	}
	if srcs[1].Name != StdinName || srcs[1].Dir != "." {
		t.Errorf("stdin source = %+v", srcs[1])
	}

	cases := []struct {
		name  string
		paths []string
		class fault.Class
		says  string
	}{
		{"nothing", nil, fault.Usage, "no declaration file given"},
		{"stdin twice", []string{"-", "-"}, fault.Usage, "more than once"},
		{"missing", []string{filepath.Join(dir, "nope.toml")}, fault.Failure, "nope.toml does not exist"},
		{"directory", []string{dir}, fault.Usage, "is a directory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(c.paths, strings.NewReader(""))
			if err == nil || fault.ClassOf(err) != c.class || !strings.Contains(err.Error(), c.says) {
				t.Errorf("err = %v (class %v), want class %v saying %q", err, fault.ClassOf(err), c.class, c.says)
			}
		})
	}
}

// Problems in standard input name it; its `source =` paths start at the
// working directory.
func TestParseStdin(t *testing.T) {
	_, problems := Parse([]Source{{Name: "-", Data: []byte("bogus = 1\n"), Dir: "."}})
	if len(problems) != 1 || problems[0].String() != "<stdin>:1: bogus: unknown key (want prune, vars, role, node or rollout)" {
		t.Errorf("got:\n%s", problemLines(problems))
	}
}
