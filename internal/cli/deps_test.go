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
	terminal := []string{"github.com/spf13/pflag", "golang.org/x/term", "github.com/schollz/progressbar/v3"}
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
			// Test harnesses talk to whoever runs the tests: testutil, and
			// the lab with the daemon it packages for its hosts.
			slash := filepath.ToSlash(path)
			if strings.Contains(slash, "internal/cli/") || strings.Contains(slash, "internal/testutil/") || strings.Contains(slash, "internal/lab/") {
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

// hostSidePackages are the packages a host runs from its timer and when it
// briefs: they may depend only on each other and on sharedPackages. A
// path names the package and every package under it.
var hostSidePackages = []string{
	"internal/apply", "internal/upgrade", "internal/host", "internal/report",
	"internal/brief", "internal/ledger", "internal/resource",
}

// sharedPackages are the packages both sides use: formats, keys, the
// spool and small helpers that know neither a host's business nor the
// mesh's.
var sharedPackages = []string{
	"spool", "internal/bundle", "internal/generation", "internal/repo",
	"internal/keys", "internal/outcome",
	"internal/fault", "internal/atomicfile", "internal/bincode", "internal/hugepage",
	"internal/tomlfile", "internal/workpool", "internal/s3client",
}

// TestHostSideNeverImportsMeshSide keeps the host's code free of the
// mesh's: admission, trust, declaring and the fleet view (enrol, token,
// mesh, declaration, declare, fleet, gc, spoolcheck) are never built into
// what a host needs to apply. A host-side package may reach only
// host-side and shared packages, so a package of either side that a host
// package starts to import has to be placed in one of the lists above.
// Test files are not held to it: a host's tests may build a whole mesh
// around it.
func TestHostSideNeverImportsMeshSide(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "../../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const mod = "github.com/muster-tool/muster/"
	imports := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], mod)
		for _, imp := range fields[1:] {
			if strings.HasPrefix(imp, mod) {
				imports[pkg] = append(imports[pkg], strings.TrimPrefix(imp, mod))
			}
		}
		if _, ok := imports[pkg]; !ok {
			imports[pkg] = nil
		}
	}
	in := func(pkg string, list []string) bool {
		for _, p := range list {
			if pkg == p || strings.HasPrefix(pkg, p+"/") {
				return true
			}
		}
		return false
	}
	for _, p := range append(append([]string(nil), hostSidePackages...), sharedPackages...) {
		if _, ok := imports[p]; !ok {
			t.Errorf("there is no package %s: update the lists in deps_test.go", p)
		}
	}
	for pkg := range imports {
		if !in(pkg, hostSidePackages) {
			continue
		}
		// Walk pkg's dependencies breadth first, remembering how each was
		// reached so that a failure names the chain of imports.
		via := map[string]string{pkg: ""}
		queue := []string{pkg}
		for len(queue) > 0 {
			p := queue[0]
			queue = queue[1:]
			for _, imp := range imports[p] {
				if _, seen := via[imp]; seen {
					continue
				}
				via[imp] = p
				if in(imp, hostSidePackages) || in(imp, sharedPackages) {
					queue = append(queue, imp)
					continue
				}
				chain := imp
				for q := p; q != ""; q = via[q] {
					chain = q + " -> " + chain
				}
				t.Errorf("%s depends on %s (%s): a host-side package may depend only on host-side and shared ones; if %s is neither mesh-side nor a host's business, add it to sharedPackages in deps_test.go", pkg, imp, chain, imp)
			}
		}
	}
}
