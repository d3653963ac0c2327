package upgrade

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/internal/host"
	"github.com/muster-tool/muster/internal/keys"
	"github.com/muster-tool/muster/internal/repo"
	"github.com/muster-tool/muster/internal/resource"
	"github.com/muster-tool/muster/spool"
)

// site is a mesh with one enrolled host and a declaration for it, made
// by the real muster command line.
type site struct {
	dir, mesh, spool, config, state string
	muster                          string
}

func newSite(t *testing.T, declaration string) *site {
	t.Helper()
	dir := t.TempDir()
	s := &site{dir: dir, mesh: filepath.Join(dir, "mesh"), spool: filepath.Join(dir, "spool"),
		config: filepath.Join(dir, "host", "muster.toml"), state: filepath.Join(dir, "host", "state"),
		muster: musterBinary(t, "1.0")}
	if err := os.Mkdir(s.spool, 0o755); err != nil {
		t.Fatal(err)
	}
	s.run(t, "", "init", "--mesh", s.mesh, "--spool", s.spool)
	token := s.run(t, "", "enrol", "issue", "--mesh", s.mesh, "node-1")
	s.run(t, token, "enrol", "join", "--spool", s.spool, "--config", s.config, "--state", s.state)
	if declaration != "" {
		s.declare(t, declaration)
	}
	return s
}

func (s *site) run(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(s.muster, args...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "MUSTER_SPOOL=", "MUSTER_MESH=")
	cmd.Stdin = strings.NewReader(stdin)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("muster %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

func (s *site) declare(t *testing.T, declaration string) {
	t.Helper()
	f := filepath.Join(s.dir, "site.toml")
	if err := os.WriteFile(f, []byte(declaration), 0o644); err != nil {
		t.Fatal(err)
	}
	s.run(t, "", "declare", "--mesh", s.mesh, f)
}

func (s *site) host(t *testing.T) (*host.Config, *host.Identity) {
	t.Helper()
	cfg, err := host.LoadConfig(s.config)
	if err != nil {
		t.Fatal(err)
	}
	id, err := host.LoadIdentity(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, id
}

const motd = `[role.all]
nodes = ["*"]

[role.all.file."/etc/motd"]
content = "managed\n"

[role.all.directory."/srv/www"]
`

// The self-check is the new binary proving it can do its job here before
// the old one steps aside: read the config and keys, reach the spool,
// verify and decrypt this node's declaration, and read the repository
// index. Each of those, broken for real, fails it.
func TestSelfCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newSite(t, motd)
	cfg, id := s.host(t)
	got, err := SelfCheck(ctx, cfg, id)
	if err != nil {
		t.Fatal(err)
	}
	if got.Generation != 1 || got.Resources != 2 || got.RepositoryIndex != 0 {
		t.Errorf("SelfCheck = %+v, want generation 1 with 2 resources and no repository", got)
	}

	// A repository index signed by the mesh is read; one signed by
	// anybody else is junk, passed over as apply passes over it.
	pair, err := keys.Load(s.mesh, "mesh")
	if err != nil {
		t.Fatal(err)
	}
	sp, err := spool.OpenDir(s.spool)
	if err != nil {
		t.Fatal(err)
	}
	putIndex(t, sp, pair.Sign, 1)
	if got, err := SelfCheck(ctx, cfg, id); err != nil || got.RepositoryIndex != 1 {
		t.Errorf("with a repository: %+v, %v", got, err)
	}
	_, foreign, _ := ed25519.GenerateKey(rand.Reader)
	putIndex(t, sp, foreign, 2)
	if got, err := SelfCheck(ctx, cfg, id); err != nil || got.RepositoryIndex != 1 {
		t.Errorf("forged index: %+v, %v; want index 1", got, err)
	}
	os.Remove(filepath.Join(s.spool, "repo", "index", "00000000000000000002"))

	// A declaration signed by the mesh that declare would have refused:
	// a muster that would refuse it at every apply fails its self-check.
	c, err := generation.ReadCommit(ctx, sp, 1, pair.Sign.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	nd := generation.NodeDeclaration{Version: generation.FormatVersion, Generation: 1, Run: c.Run, Node: "node-1", NodeID: id.NodeID(),
		DeclaredAt: time.Now().UTC(), Resources: []resource.Spec{{Kind: resource.File, Path: "/etc/../etc/motd", Content: "x"}}}
	rcpt, err := id.Pair.Public().Recipient()
	if err != nil {
		t.Fatal(err)
	}
	forged, err := bundle.SealTOML(nd, generation.DeclCtx(1, c.Run, id.NodeID()), pair.Sign, rcpt)
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(s.spool, spool.DeclName(1, c.Run, id.NodeID()))
	os.Chmod(name, 0o644)
	if err := os.WriteFile(name, forged, 0o444); err != nil {
		t.Fatal(err)
	}
	if _, err := SelfCheck(ctx, cfg, id); fault.ClassOf(err) != fault.Refused || !strings.Contains(err.Error(), `declaration of generation 1 refused: resource 1 of 1, file:/etc/../etc/motd: path "/etc/../etc/motd" contains ..`) {
		t.Errorf("a declaration declare would refuse: err = %v", err)
	}

	// A damaged declaration: the node's, not the settings the declare
	// run kept for the mesh beside it.
	var decl string
	filepath.WalkDir(filepath.Join(s.spool, "decl"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() != "mesh" {
			decl = p
		}
		return nil
	})
	data, err := os.ReadFile(decl)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 1
	os.Chmod(decl, 0o644)
	if err := os.WriteFile(decl, data, 0o444); err != nil {
		t.Fatal(err)
	}
	if _, err := SelfCheck(ctx, cfg, id); fault.ClassOf(err) != fault.Refused || !strings.Contains(err.Error(), "declaration decl/00000000000000000001/") {
		t.Errorf("damaged declaration: err = %v", err)
	}

	// A spool that is not there.
	cfg.Spool = filepath.Join(s.dir, "gone")
	if _, err := SelfCheck(ctx, cfg, id); err == nil {
		t.Error("a missing spool passed the self-check")
	}
}

func TestSelfCheckWithNothingDeclared(t *testing.T) {
	t.Parallel()
	s := newSite(t, "")
	cfg, id := s.host(t)
	got, err := SelfCheck(context.Background(), cfg, id)
	if err != nil || got.Generation != 0 {
		t.Errorf("SelfCheck = %+v, %v; want generation 0", got, err)
	}
}

// putIndex writes an empty repository index seq signed by key.
func putIndex(t *testing.T, sp spool.Spool, key ed25519.PrivateKey, seq uint64) {
	t.Helper()
	name := repo.IndexName(seq)
	ix := repo.Index{Version: repo.FormatVersion, Seq: seq, Created: time.Now().UTC().Truncate(time.Second)}
	data, err := bundle.SignTOML(ix, bundle.Context{Kind: "repo-index", Name: name}, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := sp.Put(context.Background(), name, data); err != nil {
		t.Fatal(err)
	}
}
