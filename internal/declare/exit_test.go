package declare_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/muster-tool/muster/internal/cli"
)

// muster runs the command line in-process and returns its exit status and
// standard error.
func muster(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli.Main(context.Background(), args, cli.Stdio{In: strings.NewReader(""), Out: &out, Err: &errb})
	return code, errb.String()
}

// `muster declare` on a spool it cannot write exits with the status for a
// temporary failure, and commits nothing. (The other statuses are tested
// by the scripts in testscripts/; this one needs a read-only mount.)
func TestDeclareOnReadOnlySpoolExitsTemporary(t *testing.T) {
	dir := t.TempDir()
	sp, mesh := filepath.Join(dir, "spool"), filepath.Join(dir, "mesh")
	if err := os.Mkdir(sp, 0o755); err != nil {
		t.Fatal(err)
	}
	if code, stderr := muster(t, "init", "--mesh", mesh, "--spool", sp); code != 0 {
		t.Fatalf("init: %d %s", code, stderr)
	}
	site := filepath.Join(dir, "site.toml")
	if err := os.WriteFile(site, []byte("[role.all]\nnodes = [\"*\"]\n[role.all.file.\"/etc/motd\"]\ncontent = \"hi\\n\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount(sp, sp, "", syscall.MS_BIND, ""); err != nil {
		t.Skipf("cannot bind-mount here (%v): run as root", err)
	}
	defer func() {
		if err := syscall.Unmount(sp, 0); err != nil {
			t.Errorf("unmount: %v", err)
		}
	}()
	if err := syscall.Mount("", sp, "", syscall.MS_REMOUNT|syscall.MS_BIND|syscall.MS_RDONLY, ""); err != nil {
		t.Fatal(err)
	}
	code, stderr := muster(t, "declare", "--mesh", mesh, site)
	if code != cli.ExitTemporary {
		t.Errorf("exit status %d, want %d; stderr:\n%s", code, cli.ExitTemporary, stderr)
	}
	if !strings.Contains(stderr, "muster: error: ") || !strings.Contains(stderr, "nothing was committed") || !strings.Contains(stderr, "muster: hint: ") {
		t.Errorf("stderr:\n%s", stderr)
	}
	if _, err := os.Stat(filepath.Join(sp, "commit")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("commit/ exists after a failed declare: %v", err)
	}
}
