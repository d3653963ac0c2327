package upgrade

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/repo"
	"github.com/muster-tool/muster/internal/resource/debian"
	"github.com/muster-tool/muster/spool"
)

const moduleRoot = "../.."

// shared holds what is built once per test binary run: real muster
// binaries (one Go build per version stamp) and packages.
var shared struct {
	mu   sync.Mutex
	dir  string
	bins map[string]string
	debs map[string]string
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

func sharedDir(t *testing.T) string {
	t.Helper()
	if shared.dir == "" {
		d, err := os.MkdirTemp("", "muster-upgrade-test-")
		if err != nil {
			t.Fatal(err)
		}
		shared.dir = d
		shared.bins = map[string]string{}
		shared.debs = map[string]string{}
	}
	return shared.dir
}

// needRoot skips tests that install packages: dpkg needs root.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("installing Debian packages needs root")
	}
	for _, tool := range []string{"dpkg-deb", "apt-get", "dpkg-query"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: install the Debian packages dpkg and apt", tool)
		}
	}
}

// musterBinary builds this module's muster with version stamped, once
// per version.
func musterBinary(t *testing.T, version string) string {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if b, ok := shared.bins[version]; ok {
		return b
	}
	out := filepath.Join(sharedDir(t), "muster-"+version)
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-X github.com/muster-tool/muster/internal/cli.version="+version, "-o", out, "./cmd/muster")
	cmd.Dir = moduleRoot
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build muster %s: %v\n%s", version, err, b)
	}
	shared.bins[version] = out
	return out
}

// script writes an executable file with content and returns its path.
func script(t *testing.T, content string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "muster")
	if err := os.WriteFile(f, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
	return f
}

// musterDeb builds the muster package of version with scripts/deb.sh,
// packaging binary as /usr/bin/muster. Packages are cached by version:
// each version is built from one binary per test run.
func musterDeb(t *testing.T, version, binary string) string {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if d, ok := shared.debs[version]; ok {
		return d
	}
	out := filepath.Join(sharedDir(t), "debs")
	cmd := exec.Command(filepath.Join(moduleRoot, "scripts", "deb.sh"), version, out)
	// gzip: xz spends seconds on each package, and the test builds several.
	cmd.Env = append(os.Environ(), "MUSTER_BINARY="+binary, "DEB_COMPRESS=gzip")
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/deb.sh %s: %v\n%s", version, err, b)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	deb := lines[len(lines)-1]
	shared.debs[version] = deb
	return deb
}

// testHost is a scratch root with its state directory, package repository
// (materialized from a directory spool by internal/repo, as apply does)
// and apt pointed at it.
type testHost struct {
	root, state, repoDir string
	sp                   *spool.Dir
	sign                 ed25519.PrivateKey
	aptOpts              []string
	apt                  *debian.Apt
}

func newHost(t *testing.T) *testHost {
	t.Helper()
	needRoot(t)
	h := &testHost{root: t.TempDir(), state: t.TempDir()}
	h.repoDir = filepath.Join(h.state, "repo")
	if err := debian.PrepareRoot(h.root); err != nil {
		t.Fatal(err)
	}
	sp, err := spool.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h.sp = sp
	if _, h.sign, err = ed25519.GenerateKey(rand.Reader); err != nil {
		t.Fatal(err)
	}
	etc := t.TempDir()
	list := filepath.Join(etc, "sources.list")
	if err := os.WriteFile(list, []byte(repo.SourcesLine(h.repoDir)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.aptOpts = []string{
		"Dir::Etc::sourcelist=" + list,
		"Dir::Etc::sourceparts=" + filepath.Join(etc, "none"),
		"Acquire::Languages=none",
		"APT::Sandbox::User=root",
	}
	h.apt = debian.New(h.root, debian.Options{Update: true, Config: h.aptOpts})
	had := machineMuster()
	t.Cleanup(func() {
		if now := machineMuster(); now != had {
			t.Errorf("the machine's own dpkg lists muster %q, before the test %q", now, had)
		}
	})
	return h
}

// publish adds packages to the host's spool repository and materializes
// it; the next apt call reads the new lists (a fresh backend updates).
func (h *testHost) publish(t *testing.T, debs ...string) {
	t.Helper()
	ctx := context.Background()
	var ds []*repo.Deb
	for _, d := range debs {
		rd, err := repo.ReadDeb(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, rd)
	}
	if _, err := repo.Add(ctx, h.sp, h.sign, ds, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := repo.Materialize(ctx, h.sp, h.sign.Public().(ed25519.PublicKey), h.repoDir); err != nil {
		t.Fatal(err)
	}
	// A new backend runs apt-get update before its first install.
	h.apt = debian.New(h.root, debian.Options{Update: true, Config: h.aptOpts})
}

func (h *testHost) installed(t *testing.T) string {
	t.Helper()
	got, err := h.apt.Installed(context.Background(), []string{PackageName})
	if err != nil {
		t.Fatal(err)
	}
	return got[PackageName]
}

func (h *testHost) install(t *testing.T, version string) {
	t.Helper()
	if err := h.apt.Install(context.Background(), map[string]string{PackageName: version}); err != nil {
		t.Fatalf("install muster %s: %v", version, err)
	}
	if v := h.installed(t); v != version {
		t.Fatalf("dpkg lists muster %q after installing %s", v, version)
	}
}

// machineMuster is the muster version the machine's own dpkg lists.
func machineMuster() string {
	b, _ := exec.Command("dpkg-query", "-W", "-f", "${Version}", PackageName).Output()
	return string(b)
}

func fileEqual(t *testing.T, a, b string) bool {
	t.Helper()
	x, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(x) == string(y)
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
