package apply_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/apply"
	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/declaration"
	"github.com/muster-tool/muster/internal/declare"
	"github.com/muster-tool/muster/internal/enrol"
	"github.com/muster-tool/muster/internal/host"
	"github.com/muster-tool/muster/internal/mesh"
	"github.com/muster-tool/muster/internal/report"
	"github.com/muster-tool/muster/spool"
)

// fixture is a real mesh with a real directory spool and hosts enrolled in
// it the way `muster enrol join` and `muster declare` enrol them: real
// keys, real bundles, real briefings.
type fixture struct {
	t     testing.TB
	ctx   context.Context
	dir   string
	spool string
	m     *mesh.Mesh
	hosts map[string]*testHost
	// recovery, when set, is handed to declare as the mesh's recovery
	// copies.
	recovery map[string]declare.Recovery
}

// testHost is one enrolled host: its config, state directory and a
// directory tree standing for its root file system.
type testHost struct {
	name   string
	config string
	state  string
	root   string
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	dir := t.TempDir()
	sp := filepath.Join(dir, "spool")
	if err := os.Mkdir(sp, 0o755); err != nil {
		t.Fatal(err)
	}
	return newFixtureAt(t, dir, sp)
}

// newFixtureAt is newFixture with the spool at location sp, such as an
// S3 spool, and the rest in dir.
func newFixtureAt(t testing.TB, dir, sp string) *fixture {
	t.Helper()
	ctx := context.Background()
	m, err := mesh.Init(ctx, filepath.Join(dir, "mesh"), sp, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, ctx: ctx, dir: dir, spool: sp, m: m, hosts: map[string]*testHost{}}
}

// The users and groups of every test root: owners and groups under a root
// are looked up in the root's own databases, not the machine's.
const (
	testPasswd = "root:x:0:0:root:/root:/bin/sh\napp:x:1234:1234::/srv/app:/usr/sbin/nologin\n"
	testGroup  = "root:x:0:\napp:x:1234:\nstaff:x:50:\n"
)

// minimalRoot makes a root with what the briefing's checks look for and a
// user database.
func minimalRoot(t testing.TB, root string) {
	t.Helper()
	for _, d := range []string{"etc", "var/lib/dpkg"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(root, "etc/os-release"), "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\n")
	writeFile(t, filepath.Join(root, "var/lib/dpkg/status"), "")
	writeFile(t, filepath.Join(root, "etc/passwd"), testPasswd)
	writeFile(t, filepath.Join(root, "etc/group"), testGroup)
}

// enrol issues a token for name, joins a new host with it and admits it.
func (f *fixture) enrol(name string) *testHost {
	f.t.Helper()
	h := &testHost{
		name:   name,
		config: filepath.Join(f.dir, "hosts", name, "muster.toml"),
		state:  filepath.Join(f.dir, "hosts", name, "state"),
		root:   filepath.Join(f.dir, "hosts", name, "root"),
	}
	minimalRoot(f.t, h.root)
	reg, err := enrol.LoadRegistry(f.ctx, f.m)
	if err != nil {
		f.t.Fatal(err)
	}
	now := time.Now()
	tok, err := enrol.Issue(f.ctx, f.m, reg, enrol.IssueOptions{Name: name, Expires: time.Hour, Now: now})
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := enrol.Join(f.ctx, enrol.JoinOptions{
		Token: tok.String(), Spool: f.spool, Config: h.config, State: h.state, Root: h.root,
		Version: "test", Now: now,
	}); err != nil {
		f.t.Fatalf("host %s joins: %v", name, err)
	}
	if _, _, err := enrol.Admit(f.ctx, f.m, now); err != nil {
		f.t.Fatal(err)
	}
	f.hosts[name] = h
	return h
}

// declare commits src (a declaration's TOML) as the next generation and
// returns its number.
func (f *fixture) declare(src string) uint64 {
	f.t.Helper()
	g, err := f.tryDeclare(src)
	if err != nil {
		f.t.Fatalf("declare: %v", err)
	}
	return g
}

func (f *fixture) tryDeclare(src string) (uint64, error) {
	decl, problems := declaration.Parse([]declaration.Source{{Name: "site.toml", Data: []byte(src), Dir: f.dir}})
	if declaration.HasErrors(problems) {
		f.t.Fatalf("declaration: %v", problems)
	}
	_, reg, err := enrol.Admit(f.ctx, f.m, time.Now())
	if err != nil {
		return 0, err
	}
	briefs, _, err := reg.Briefings(f.ctx, f.m)
	if err != nil {
		return 0, err
	}
	o := declare.Options{Now: time.Now()}
	if f.recovery != nil {
		o.Recovery = func(name string) (declare.Recovery, bool) {
			r, ok := f.recovery[name]
			return r, ok
		}
	}
	res, err := declare.Declare(f.ctx, f.m, reg, briefs, decl, o)
	if err != nil {
		return 0, err
	}
	return res.Generation, nil
}

// options builds apply's options for h the way `muster apply` does, with
// the given spool (nil: the fixture's).
func (f *fixture) options(h *testHost) apply.Options {
	f.t.Helper()
	cfg, err := host.LoadConfig(h.config)
	if err != nil {
		f.t.Fatal(err)
	}
	id, err := host.LoadIdentity(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	sp, err := spool.Open(cfg.Spool)
	if err != nil {
		f.t.Fatal(err)
	}
	return apply.Options{Config: cfg, Identity: id, Spool: sp, Root: h.root, Version: "test", Now: time.Now}
}

// apply runs one apply on h; edit may change the options first.
func (f *fixture) apply(h *testHost, edit ...func(*apply.Options)) (*apply.Result, error) {
	f.t.Helper()
	o := f.options(h)
	for _, e := range edit {
		e(&o)
	}
	return apply.Run(f.ctx, o)
}

// mustApply is apply that fails the test on error.
func (f *fixture) mustApply(h *testHost, edit ...func(*apply.Options)) *apply.Result {
	f.t.Helper()
	res, err := f.apply(h, edit...)
	if err != nil {
		f.t.Fatalf("apply on %s: %v", h.name, err)
	}
	return res
}

// reports opens every report h wrote to the spool, oldest first, as the
// mesh reads them: decrypted with the mesh key, signature checked against
// the host's key.
func (f *fixture) reports(h *testHost) []*report.Report {
	f.t.Helper()
	o := f.options(h)
	nodeID := o.Identity.NodeID()
	sign := o.Identity.Pair.Sign.Public().(ed25519.PublicKey)
	var out []*report.Report
	err := f.m.Spool.List(f.ctx, "report/"+nodeID+"/", func(i spool.Info) error {
		_, gen, seq, err := spool.ParseReportName(i.Name)
		if err != nil {
			return err
		}
		data, err := f.m.Spool.Get(f.ctx, i.Name, 0)
		if err != nil {
			return err
		}
		var r report.Report
		if err := bundle.OpenTOML(data, report.Ctx(nodeID, gen, seq), f.m.Pair.Age, sign, &r); err != nil {
			return fmt.Errorf("report %s: %w", i.Name, err)
		}
		out = append(out, &r)
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

// meshKey is the mesh's public signing key.
func (f *fixture) meshKey() ed25519.PublicKey { return f.m.Pair.Sign.Public().(ed25519.PublicKey) }

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// everyNode starts a declaration whose role "all" selects every node; its
// resources are tables [role.all.TYPE."..."].
const everyNode = "[role.all]\nnodes = [\"*\"]\n\n"
