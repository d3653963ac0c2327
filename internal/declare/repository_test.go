package declare

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/muster-tool/muster/internal/repo"
	"github.com/muster-tool/muster/internal/testutil/aptrepo"
)

// A package the mesh's repository holds some version of comes from it: an
// exact version it lacks is a problem at the entry, naming what it has.
// Other packages, and versions that are not exact, are not checked.
func TestRepositoryProblems(t *testing.T) {
	f := newFixture(t)
	src := `[role.lab]
nodes = ["*"]

[role.lab.package.curl]
version = "7.88.1-10"

[role.lab.package.labd]
version = "%s"
`
	problems := func(version string) []string {
		t.Helper()
		d := f.parse(strings.Replace(src, "%s", version, 1), nil)
		ps, err := RepositoryProblems(f.ctx, f.m, d)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range ps {
			out = append(out, filepath.Base(p.File)+":"+p.String()[len(p.File)+1:])
		}
		return out
	}
	// No repository: nothing comes from it.
	if got := problems("1.1-1"); len(got) != 0 {
		t.Fatalf("without a repository: %v", got)
	}

	pkgs := []aptrepo.Pkg{{Name: "labd", Version: "1.0-1", Arch: "amd64"}, {Name: "labd", Version: "1.0-1", Arch: "arm64"}, {Name: "labd", Version: "0.9-2"}}
	ar := aptrepo.Build(t, filepath.Join(t.TempDir(), "repo"), pkgs)
	var debs []*repo.Deb
	for _, p := range pkgs {
		d, err := repo.ReadDeb(f.ctx, ar.DebPath(p))
		if err != nil {
			t.Fatal(err)
		}
		debs = append(debs, d)
	}
	if _, err := repo.Add(f.ctx, f.m.Spool, f.m.Pair.Sign, debs, t0); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		version string
		want    string
	}{
		{"1.0-1", ""},
		{"0.9-2", ""},
		{"present", ""},
		{"latest", ""},
		{"absent", ""},
		{"1.1-1", "site.toml:7: role.lab.package.labd: version 1.1-1 of package labd is not in the mesh's repository (index 1), which has 0.9-2 (all), 1.0-1 (amd64, arm64)"},
	} {
		got := strings.Join(problems(tc.version), "\n")
		if got != tc.want {
			t.Errorf("version %q: problems %q, want %q", tc.version, got, tc.want)
		}
	}
}
