// Package aptrepo builds real local apt repositories for tests: .deb files
// made by dpkg-deb and indexed by dpkg-scanpackages into a flat repository
// that apt reads through a file: source. It needs root (packages are built
// root-owned and tests install them) and the Debian packages dpkg and
// dpkg-dev.
package aptrepo

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// Pkg is one package to build. It has no dependencies and no maintainer
// scripts, so it installs into a scratch root.
type Pkg struct {
	Name    string
	Version string
	// Files maps absolute paths inside the package to their content;
	// files are 0644 and directories 0755, owned by root.
	Files map[string]string
	// Arch is the Debian architecture; "" means "all".
	Arch string
}

// Repo is a built repository.
type Repo struct {
	// Dir holds the .deb files and the Packages index.
	Dir string
	// SourcesLine is the apt sources.list line for the repository.
	SourcesLine string
	// Options are apt configuration items ("Name=value", each for -o)
	// that make apt read this repository and nothing else: a sources.list
	// with SourcesLine, an empty sources.list.d, no translation files, and
	// downloads as root (the test's temporary directories are not
	// readable by apt's unprivileged download user).
	Options []string
}

// Build writes the packages into dir as a flat apt repository and returns
// how to point apt at it. It skips the test when not running as root and
// fails it when dpkg-deb or dpkg-scanpackages is missing.
func Build(t testing.TB, dir string, pkgs []Pkg) Repo {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("building and installing Debian packages needs root")
	}
	for _, tool := range []string{"dpkg-deb", "dpkg-scanpackages"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: install the Debian packages dpkg and dpkg-dev", tool)
		}
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range pkgs {
		buildDeb(t, dir, p)
	}

	scan := exec.Command("dpkg-scanpackages", "--multiversion", ".", "/dev/null")
	scan.Dir = dir
	var stderr strings.Builder
	scan.Stderr = &stderr
	index, err := scan.Output()
	if err != nil {
		t.Fatalf("dpkg-scanpackages in %s: %v: %s", dir, err, stderr.String())
	}
	write(t, filepath.Join(dir, "Packages"), string(index))

	line := fmt.Sprintf("deb [trusted=yes] file:%s ./", dir)
	sources := filepath.Join(dir, "sources.list")
	write(t, sources, line+"\n")
	parts := filepath.Join(dir, "sources.list.d")
	if err := os.MkdirAll(parts, 0o755); err != nil {
		t.Fatal(err)
	}
	return Repo{
		Dir:         dir,
		SourcesLine: line,
		Options: []string{
			"Dir::Etc::sourcelist=" + sources,
			"Dir::Etc::sourceparts=" + parts,
			"Acquire::Languages=none",
			"APT::Sandbox::User=root",
		},
	}
}

// DebPath returns the file name Build gives a package's .deb in the
// repository.
func (r Repo) DebPath(p Pkg) string {
	return filepath.Join(r.Dir, debName(p))
}

func debName(p Pkg) string {
	v := p.Version
	// The epoch is not part of a .deb file name.
	if _, rest, ok := strings.Cut(v, ":"); ok {
		v = rest
	}
	return fmt.Sprintf("%s_%s_%s.deb", p.Name, v, arch(p))
}

func arch(p Pkg) string {
	if p.Arch == "" {
		return "all"
	}
	return p.Arch
}

func buildDeb(t testing.TB, dir string, p Pkg) {
	t.Helper()
	tree := t.TempDir()
	// The tree's own mode becomes the mode of / in the package.
	if err := os.Chmod(tree, 0o755); err != nil {
		t.Fatal(err)
	}
	paths := make([]string, 0, len(p.Files))
	for path := range p.Files {
		paths = append(paths, path)
	}
	sort.Strings(paths)
	for _, path := range paths {
		if !filepath.IsAbs(path) {
			t.Fatalf("package %s: file path %q is not absolute", p.Name, path)
		}
		full := filepath.Join(tree, path)
		mkdirs(t, tree, filepath.Dir(path))
		write(t, full, p.Files[path])
	}
	control := fmt.Sprintf("Package: %s\nVersion: %s\nArchitecture: %s\nMaintainer: muster tests <tests@muster.invalid>\nDescription: %s %s for muster tests\n",
		p.Name, p.Version, arch(p), p.Name, p.Version)
	mkdirs(t, tree, "/DEBIAN")
	write(t, filepath.Join(tree, "DEBIAN", "control"), control)

	out := filepath.Join(dir, debName(p))
	cmd := exec.Command("dpkg-deb", "--root-owner-group", "-Zgzip", "--build", tree, out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb --build %s %s: %v: %s", p.Name, p.Version, err, b)
	}
}

// mkdirs creates rel and its parents under tree with mode 0755 whatever
// the umask, since the modes go into the package.
func mkdirs(t testing.TB, tree, rel string) {
	t.Helper()
	p := tree
	for _, part := range strings.Split(strings.Trim(rel, "/"), "/") {
		if part == "" {
			continue
		}
		p = filepath.Join(p, part)
		if err := os.Mkdir(p, 0o755); err != nil && !os.IsExist(err) {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func write(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
}
