package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/cli"
)

// TestDeclareStopsOnSignal runs the real binary, whose main turns SIGINT
// and SIGTERM into a cancelled context, on a declaration that takes many
// seconds to parse, and signals it while it parses: it must exit at once
// with the status for a temporary failure, saying it was interrupted, and
// leave the spool as it was.
func TestDeclareStopsOnSignal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds muster and writes a large declaration")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "muster")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	mesh, sp := filepath.Join(dir, "mesh"), filepath.Join(dir, "spool")
	if err := os.Mkdir(sp, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "init", "--mesh", mesh, "--spool", sp).CombinedOutput(); err != nil {
		t.Fatalf("init: %v\n%s", err, out)
	}
	// Half a million resources, 30 MB: parsing alone takes seconds on
	// any machine.
	site := filepath.Join(dir, "site.toml")
	f, err := os.Create(site)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	w.WriteString("[role.all]\nnodes = [\"*\"]\n")
	for i := range 500_000 {
		fmt.Fprintf(w, "[role.all.file.\"/etc/many/f%06d\"]\ncontent = \"x\"\nmode = \"0644\"\n", i)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	before := tree(t, sp)

	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			var stderr bytes.Buffer
			cmd := exec.Command(bin, "declare", "--mesh", mesh, site)
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			time.Sleep(500 * time.Millisecond)
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			var err error
			select {
			case err = <-exited:
			case <-time.After(5 * time.Second):
				cmd.Process.Kill()
				<-exited
				t.Fatalf("declare still running 5s after %v", sig)
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != cli.ExitTemporary {
				t.Errorf("exit: %v, want status %d", err, cli.ExitTemporary)
			}
			name := map[syscall.Signal]string{syscall.SIGTERM: "terminated", syscall.SIGINT: "interrupt"}[sig]
			want := "muster: error: interrupted (" + name + " signal received)\nmuster: hint: run the command again\n"
			if stderr.String() != want {
				t.Errorf("stderr:\n%s\nwant:\n%s", stderr.String(), want)
			}
			if after := tree(t, sp); !slices.Equal(before, after) {
				t.Errorf("the spool changed:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
}

// tree lists every file and directory below dir, temp files included.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		out = append(out, strings.TrimPrefix(p, dir))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
