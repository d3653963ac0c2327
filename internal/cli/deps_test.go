package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestOnlyCLIKnowsTheTerminal keeps the layout honest: flags, tables and
// the terminal are imported only by internal/cli, and no package below it
// writes to the standard streams or exits.
func TestOnlyCLIKnowsTheTerminal(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "../../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const mod = "github.com/muster-tool/muster"
	terminal := []string{"github.com/spf13/pflag", "github.com/olekukonko/tablewriter", "golang.org/x/term", "github.com/schollz/progressbar/v3"}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := fields[0]
		if pkg == mod+"/internal/cli" || pkg == mod+"/cmd/muster" || strings.HasPrefix(pkg, mod+"/testscripts") {
			continue
		}
		for _, imp := range fields[1:] {
			for _, t2 := range terminal {
				if imp == t2 {
					t.Errorf("%s imports %s: only internal/cli may", pkg, imp)
				}
			}
			if imp == mod+"/internal/cli" {
				t.Errorf("%s imports internal/cli: imports flow one way, from cli down", pkg)
			}
		}
	}
	// No package below cli prints to the standard streams or exits.
	root := filepath.Join("..", "..")
	for _, dir := range []string{"internal", "spool"} {
		filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			if strings.Contains(filepath.ToSlash(path), "internal/cli/") || strings.Contains(filepath.ToSlash(path), "internal/testutil/") {
				return nil
			}
			src, _ := os.ReadFile(path)
			for _, bad := range []string{"os.Stdout", "os.Stderr", "os.Exit(", "fmt.Print", "log.Print", "log.Fatal"} {
				if strings.Contains(string(src), bad) {
					t.Errorf("%s uses %s: only internal/cli talks to the terminal", path, bad)
				}
			}
			return nil
		})
	}
}
