package declare

import (
	"context"
	"fmt"
	"strings"

	"github.com/muster-tool/muster/internal/declaration"
	"github.com/muster-tool/muster/internal/mesh"
	"github.com/muster-tool/muster/internal/repo"
)

// RepositoryHint says what to do about a package version the mesh's
// repository does not have.
const RepositoryHint = "publish that version first (muster spool repo add PACKAGE.deb), or declare a version the repository holds; muster spool repo list shows them"

// RepositoryProblems checks the exact package versions decl asks for
// against the mesh's repository in the spool (see muster-upgrade(7)). A
// package comes from that repository when the repository holds some
// version of it: then an exact version it does not hold could never be
// installed, and every host would fail the line, so it is a problem at
// the package's entry, naming the versions there are. Packages the
// repository holds no version of come from the hosts' other apt sources
// and are not checked; neither are "present", "latest" and "absent". A
// declaration with no exact versions reads nothing.
func RepositoryProblems(ctx context.Context, m *mesh.Mesh, decl *declaration.Declaration) ([]declaration.Problem, error) {
	var exact []declaration.PackageEntry
	for _, e := range decl.Packages() {
		if e.Exact() {
			exact = append(exact, e)
		}
	}
	if len(exact) == 0 {
		return nil, nil
	}
	x, err := repo.ReadIndexes(ctx, m.Spool, m.Verifier())
	if err != nil {
		return nil, fmt.Errorf("read the mesh's repository in spool %s: %w", m.Spool, err)
	}
	if x.Newest == nil {
		return nil, nil
	}
	var out []declaration.Problem
	for _, e := range exact {
		versions, arches := x.Newest.Versions(e.Name)
		if len(versions) == 0 || len(arches[e.Version]) > 0 {
			continue
		}
		have := make([]string, len(versions))
		for i, v := range versions {
			have[i] = v + " (" + strings.Join(arches[v], ", ") + ")"
		}
		out = append(out, e.Problem(fmt.Sprintf("version %s of package %s is not in the mesh's repository (index %d), which has %s",
			e.Version, e.Name, x.Newest.Seq, strings.Join(have, ", "))))
	}
	return out, nil
}
