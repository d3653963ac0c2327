package upgrade

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/muster-tool/muster/internal/declaration"
	"github.com/muster-tool/muster/internal/repo"
	"github.com/muster-tool/muster/internal/resource"
)

// The documented way to deliver muster uses only the resource types every
// declaration has: the example must stay valid, and must point apt at
// the repository where a host with the default state directory
// materializes it.
func TestUpgradeExampleParses(t *testing.T) {
	t.Parallel()
	srcs, err := declaration.Load([]string{filepath.Join(moduleRoot, "examples", "declaration", "upgrade.toml")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, problems := declaration.Parse(srcs)
	for _, p := range problems {
		t.Errorf("problem in the example: %s", p)
	}
	if d == nil {
		t.FailNow()
	}
	resolved, _, problems := d.Resolve([]declaration.Node{{Name: "web-01"}})
	for _, p := range problems {
		t.Errorf("problem resolving the example: %s", p)
	}
	if len(resolved) != 1 {
		t.Fatalf("resolved %d nodes, want 1", len(resolved))
	}
	byID := map[string]resource.Spec{}
	for _, s := range resolved[0].Resources {
		byID[s.ID()] = s
	}
	src, ok := byID["file:/etc/apt/sources.list.d/muster.list"]
	if want := repo.SourcesLine("/var/lib/muster/repo") + "\n"; !ok || src.Content != want {
		t.Errorf("apt source %q, want %q", src.Content, want)
	}
	pkg, ok := byID["package:muster"]
	if !ok || pkg.Version == "" || strings.ContainsAny(pkg.Version, " *") || pkg.Order <= src.Order {
		t.Errorf("package:muster = %+v: want an exact version, after the source", pkg)
	}
	if _, ok := byID["service:muster-apply.timer"]; !ok {
		t.Errorf("the example does not enable the timer: %v", byID)
	}
	if got, want := len(byID), 3; got != want {
		t.Errorf("%d resources, want %d: no other resource is needed", got, want)
	}
}

// The man page shows the example without its comments; it must declare
// the same resources.
func TestManPageShowsTheExample(t *testing.T) {
	t.Parallel()
	page := mustRead(t, filepath.Join(moduleRoot, "man", "muster-upgrade.7"))
	_, rest, ok := strings.Cut(page, "upgrade.toml ) :\n.Bd -literal -offset indent\n")
	block, _, ok2 := strings.Cut(rest, ".Ed\n")
	if !ok || !ok2 {
		t.Fatal("muster-upgrade(7) has no example block after its mention of upgrade.toml")
	}
	fromPage := resolve(t, declaration.Source{Name: "muster-upgrade.7", Data: []byte(block), Dir: "."})
	srcs, err := declaration.Load([]string{filepath.Join(moduleRoot, "examples", "declaration", "upgrade.toml")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	fromFile := resolve(t, srcs[0])
	if !reflect.DeepEqual(fromPage, fromFile) {
		t.Errorf("the man page's example declares\n%+v\nthe file\n%+v", fromPage, fromFile)
	}
}

func resolve(t *testing.T, src declaration.Source) []resource.Spec {
	t.Helper()
	d, problems := declaration.Parse([]declaration.Source{src})
	if len(problems) > 0 || d == nil {
		t.Fatalf("%s: %v", src.Name, problems)
	}
	resolved, _, problems := d.Resolve([]declaration.Node{{Name: "web-01"}})
	if len(problems) > 0 || len(resolved) != 1 {
		t.Fatalf("%s: %v", src.Name, problems)
	}
	return resolved[0].Resources
}
