package enrol

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/host"
	"github.com/muster-tool/muster/internal/keys"
	"github.com/muster-tool/muster/internal/mesh"
	"github.com/muster-tool/muster/internal/token"
	"github.com/muster-tool/muster/spool"
)

// t0 is when every test mesh is created; tests move their clock from here.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fixture is a real mesh with a real directory spool, and hosts that join
// it from their own state directories.
type fixture struct {
	t    testing.TB
	ctx  context.Context
	dir  string
	m    *mesh.Mesh
	root string // a minimal root the briefing's checks pass on
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	return newFixtureIn(t, t.TempDir())
}

// newFixtureIn makes the mesh, its spool and a root in dir.
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
	return &fixture{t: t, ctx: ctx, dir: dir, m: m, root: minimalRoot(t, filepath.Join(dir, "root"))}
}

// minimalRoot makes a root directory with what the briefing's os and
// package-manager checks look for.
func minimalRoot(t testing.TB, root string) string {
	t.Helper()
	for _, d := range []string{"etc", "var/lib/dpkg"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		"etc/os-release":      "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\n",
		"var/lib/dpkg/status": "",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func (f *fixture) registry() *Registry {
	f.t.Helper()
	reg, err := LoadRegistry(f.ctx, f.m)
	if err != nil {
		f.t.Fatal(err)
	}
	return reg
}

// issue issues a token at time now, failing the test on error.
func (f *fixture) issue(o IssueOptions) *token.Token {
	f.t.Helper()
	tok, err := f.tryIssue(o)
	if err != nil {
		f.t.Fatalf("issue %s: %v", o.Name, err)
	}
	return tok
}

func (f *fixture) tryIssue(o IssueOptions) (*token.Token, error) {
	if o.Expires == 0 {
		o.Expires = DefaultExpiry
	}
	if o.Now.IsZero() {
		o.Now = t0
	}
	return Issue(f.ctx, f.m, f.registry(), o)
}

// hostDirs returns the state directory and config path of host h.
func (f *fixture) hostDirs(h string) (state, config string) {
	return filepath.Join(f.dir, "hosts", h, "state"), filepath.Join(f.dir, "hosts", h, "muster.toml")
}

// join joins host h (a directory name, not the node name) with tok.
func (f *fixture) join(h string, tok *token.Token, now time.Time) *JoinResult {
	f.t.Helper()
	res, err := f.tryJoin(h, tok.String(), now, false)
	if err != nil {
		f.t.Fatalf("host %s joins: %v", h, err)
	}
	return res
}

func (f *fixture) tryJoin(h, tok string, now time.Time, force bool) (*JoinResult, error) {
	state, config := f.hostDirs(h)
	return Join(f.ctx, JoinOptions{
		Token: tok, Spool: f.m.Spool.(*spool.Dir).Path(), Config: config, State: state,
		Root: f.root, Force: force, Version: "test", Now: now,
	})
}

// identity loads host h's identity as apply and brief do.
func (f *fixture) identity(h string) (*host.Config, *host.Identity) {
	f.t.Helper()
	_, config := f.hostDirs(h)
	cfg, err := host.LoadConfig(config)
	if err != nil {
		f.t.Fatal(err)
	}
	id, err := host.LoadIdentity(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	return cfg, id
}

// enrolled issues a token for each name, joins a host with it at t0 (each
// sends its briefing) and admits them an hour later; it returns their node
// ids by name.
func (f *fixture) enrolled(names ...string) map[string]string {
	f.t.Helper()
	nodes := map[string]string{}
	for _, name := range names {
		nodes[name] = f.join(name, f.issue(IssueOptions{Name: name}), t0).NodeID
	}
	f.admit(t0.Add(time.Hour))
	return nodes
}

func (f *fixture) admit(now time.Time) (*AdmitResult, *Registry) {
	f.t.Helper()
	res, reg, err := Admit(f.ctx, f.m, now)
	if err != nil {
		f.t.Fatalf("admit: %v", err)
	}
	return res, reg
}

// joinRequest builds a join request for token tid and name, signed by a new
// host key, with its proof made by proofKey — the real token's, or another
// one's to forge.
func joinRequest(t testing.TB, m *mesh.Mesh, tid, name string, proof *token.Token, now time.Time) (data []byte, hostFP string) {
	t.Helper()
	pair, err := keys.Generate()
	if err != nil {
		t.Fatal(err)
	}
	req := JoinRequest{Version: recordVersion, TokenID: tid, Name: name, Host: pair.Public(), Time: now}
	req.Proof = encodeSig(proof.ProofKey(), proofMessage(tid, name, req.Host))
	hostFP = req.Host.Fingerprint()
	data, err = bundle.SealTOML(req, joinCtx(tid, hostFP), pair.Sign, m.Pair.Age.Recipient())
	if err != nil {
		t.Fatal(err)
	}
	return data, hostFP
}

func (f *fixture) put(name string, data []byte) {
	f.t.Helper()
	if err := f.m.Spool.Put(f.ctx, name, data); err != nil {
		f.t.Fatal(err)
	}
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
