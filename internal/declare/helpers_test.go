package declare

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/brief"
	"github.com/muster-tool/muster/internal/declaration"
	"github.com/muster-tool/muster/internal/enrol"
	"github.com/muster-tool/muster/internal/keys"
	"github.com/muster-tool/muster/internal/mesh"
	"github.com/muster-tool/muster/internal/outcome"
	"github.com/muster-tool/muster/internal/testutil/s3server"
	"github.com/muster-tool/muster/spool"
)

// t0 is when every test mesh is created.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fixture is a real mesh with a real directory spool and a fleet of nodes
// whose identities are built directly (enrolment has its own tests): each
// node has a real key pair, so tests can open what declare sealed to it.
type fixture struct {
	t      testing.TB
	ctx    context.Context
	dir    string
	m      *mesh.Mesh
	reg    *enrol.Registry
	briefs map[string]*brief.Briefing
	pairs  map[string]*keys.Pair // by node name
	store  *s3server.Server      // when the spool is on S3 (benchmarks)
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	return newFixtureIn(t, t.TempDir())
}

// newFixtureIn makes the mesh and its spool in dir.
func newFixtureIn(t testing.TB, dir string) *fixture {
	t.Helper()
	sp := filepath.Join(dir, "spool")
	if err := os.Mkdir(sp, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	m, err := mesh.Init(ctx, filepath.Join(dir, "mesh"), sp, t0)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, ctx: ctx, dir: dir, m: m, reg: emptyRegistry(),
		briefs: map[string]*brief.Briefing{}, pairs: map[string]*keys.Pair{}}
}

func emptyRegistry() *enrol.Registry {
	return &enrol.Registry{
		Issued:     map[string]*enrol.Issued{},
		Admitted:   map[string]*enrol.Admission{},
		Refused:    map[string]*enrol.Refusal{},
		Identities: map[string]*enrol.Identity{},
		Nodes:      map[string]*enrol.Node{},
	}
}

// passed is a briefing with no failed line: the node is eligible.
func passed(name string) *brief.Briefing {
	return &brief.Briefing{Version: brief.FormatVersion, Node: name, Time: t0,
		Lines: []outcome.Line{{ID: "os", Status: outcome.OK, Detail: "debian 12"}}}
}

// failedBriefing is a briefing whose disk check failed: the node is
// ineligible.
func failedBriefing(name string) *brief.Briefing {
	return &brief.Briefing{Version: brief.FormatVersion, Node: name, Time: t0, Lines: []outcome.Line{
		{ID: "os", Status: outcome.OK, Detail: "debian 12"},
		{ID: "disk:/", Status: outcome.Failed, Detail: "12 MB free, want 999999999 MB"},
	}}
}

// enrol adds node name with a new key pair, labels and a passing briefing,
// replacing (and revoking) any identity the name had.
func (f *fixture) enrol(name string, labels map[string]string) *enrol.Identity {
	f.t.Helper()
	pair, err := keys.Generate()
	if err != nil {
		f.t.Fatal(err)
	}
	id := &enrol.Identity{NodeID: pair.Public().Fingerprint(), Name: name, Host: pair.Public(), Labels: labels, AdmittedAt: t0}
	f.add(id)
	f.pairs[name] = pair
	f.briefs[id.NodeID] = passed(name)
	return id
}

func (f *fixture) add(id *enrol.Identity) {
	f.reg.Identities[id.NodeID] = id
	n := f.reg.Nodes[id.Name]
	if n == nil {
		n = &enrol.Node{Name: id.Name}
		f.reg.Nodes[id.Name] = n
	}
	if n.Current != nil {
		n.Current.RevokedAt = t0
		n.Past = append(n.Past, n.Current)
	}
	n.Current = id
}

// parse parses declaration text written to files in a fresh directory;
// files maps names to content, and the first name sorted is the
// declaration. It fails the test on any error.
func (f *fixture) parse(src string, extra map[string]string) *declaration.Declaration {
	f.t.Helper()
	d, problems := parseIn(f.t, f.t.TempDir(), src, extra)
	if declaration.HasErrors(problems) {
		f.t.Fatalf("declaration has errors: %v", problems)
	}
	return d
}

func parseIn(t testing.TB, dir, src string, extra map[string]string) (*declaration.Declaration, []declaration.Problem) {
	t.Helper()
	for name, content := range extra {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := filepath.Join(dir, "site.toml")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	srcs, err := declaration.Load([]string{p}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return declaration.Parse(srcs)
}

// declare runs Declare with the fixture's registry and briefings.
func (f *fixture) declare(d *declaration.Declaration, o Options) (*Result, error) {
	if o.Now.IsZero() {
		o.Now = t0.Add(time.Hour)
	}
	return Declare(f.ctx, f.m, f.reg, f.briefs, d, o)
}

func (f *fixture) mustDeclare(d *declaration.Declaration, o Options) *Result {
	f.t.Helper()
	res, err := f.declare(d, o)
	if err != nil {
		f.t.Fatalf("declare: %v", err)
	}
	return res
}

// objects lists every object in the spool, sorted.
func (f *fixture) objects() []string {
	f.t.Helper()
	return listSpool(f.t, f.ctx, f.m.Spool)
}

func listSpool(t testing.TB, ctx context.Context, sp spool.Spool) []string {
	t.Helper()
	var out []string
	if err := sp.List(ctx, "", func(i spool.Info) error {
		out = append(out, i.Name)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// files lists every file below dir (temp files included), relative and
// sorted, so a test can see that nothing at all was written.
func files(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, fmt.Sprintf("%s %v %d", rel, fi.Mode(), fi.Size()))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func withPrefix(names []string, prefix string) []string {
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	return out
}

// nodeBundles lists the nodes' declaration bundles among names under
// prefix: the decl/ objects but for each run's settings document.
func nodeBundles(names []string, prefix string) []string {
	var out []string
	for _, n := range withPrefix(names, prefix) {
		if !strings.HasSuffix(n, "/mesh") {
			out = append(out, n)
		}
	}
	return out
}

// takeChanges removes the dry run's explanations from nodes, for tests
// that compare the rest, and returns them by node name.
func takeChanges(nodes []NodeChange) map[string][]ResourceChange {
	out := map[string][]ResourceChange{}
	for i := range nodes {
		out[nodes[i].Name] = nodes[i].Changes
		nodes[i].Changes = nil
	}
	return out
}
