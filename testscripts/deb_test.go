package testscripts

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/muster-tool/muster/internal/cli"
)

// The Debian package installs the shell completions where bash, zsh and
// fish look for them, made by the packaged muster itself.
func TestDebShipsCompletions(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a Debian package")
	}
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		t.Fatal("dpkg-deb not found: install dpkg (scripts/test-deps.sh does)")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The test binary is muster when called by that name (see TestMain).
	bin := filepath.Join(t.TempDir(), "muster")
	if err := os.Symlink(exe, bin); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	cmd := exec.Command(filepath.Join("..", "scripts", "deb.sh"), "1.2.3", out)
	cmd.Env = append(os.Environ(), "MUSTER_BINARY="+bin, "DEB_COMPRESS=none", "TMPDIR="+t.TempDir())
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("deb.sh: %v\n%s", err, b)
	}
	deb := strings.TrimSpace(string(b))
	tree := t.TempDir()
	if b, err := exec.Command("dpkg-deb", "-x", deb, tree).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -x: %v\n%s", err, b)
	}
	for shell, path := range map[string]string{
		"bash": "usr/share/bash-completion/completions/muster",
		"zsh":  "usr/share/zsh/vendor-completions/_muster",
		"fish": "usr/share/fish/vendor_completions.d/muster.fish",
	} {
		got, err := os.ReadFile(filepath.Join(tree, path))
		if err != nil {
			t.Errorf("the package has no %s completion: %v", shell, err)
			continue
		}
		var want bytes.Buffer
		if code := cli.Main(context.Background(), []string{"completion", shell}, cli.Stdio{Out: &want, Err: os.Stderr}); code != 0 {
			t.Fatalf("muster completion %s: exit %d", shell, code)
		}
		if !bytes.Equal(got, want.Bytes()) {
			t.Errorf("/%s is not what muster completion %s prints", path, shell)
		}
		if fi, _ := os.Stat(filepath.Join(tree, path)); fi.Mode().Perm() != 0o644 {
			t.Errorf("/%s has mode %v", path, fi.Mode().Perm())
		}
	}
	if _, err := os.Stat(filepath.Join(tree, "muster-for-completions")); err == nil {
		t.Error("the package holds the muster built to make the completions")
	}
}
