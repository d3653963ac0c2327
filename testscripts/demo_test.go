package testscripts

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The demo shows every command exactly as it runs it: each muster
// command goes through run or runsh, which print what they execute, and
// say never shows a command of its own.
func TestDemoShowsWhatItRuns(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "scripts", "demo.sh"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	command := regexp.MustCompile(`(^|[;&|(]\s*|\$\(\s*)("?\$muster"?|muster)\s`)
	heredoc := ""
	s := bufio.NewScanner(f)
	for n := 1; s.Scan(); n++ {
		line := strings.TrimSpace(s.Text())
		switch {
		case heredoc != "":
			if line == heredoc {
				heredoc = ""
			}
			continue
		case strings.HasPrefix(line, "#"):
			continue
		case strings.Contains(line, "<<'"):
			heredoc = strings.TrimSuffix(strings.SplitN(line, "<<'", 2)[1], "'")
		}
		if strings.HasPrefix(line, "say ") && strings.Contains(line, "muster ") {
			t.Errorf("demo.sh:%d: say shows a command it does not run: %s", n, line)
		}
		if strings.HasPrefix(line, "run ") || strings.HasPrefix(line, "runsh ") {
			continue
		}
		if command.MatchString(line) {
			t.Errorf("demo.sh:%d: muster runs without being shown (use run or runsh): %s", n, line)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
}

// make demo runs the whole loop to the end, with this muster.
func TestDemoRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole demo")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// The test binary is muster when called by that name (see TestMain).
	if err := os.Symlink(exe, filepath.Join(dir, "muster")); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	cmd := exec.Command("sh", filepath.Join("..", "scripts", "demo.sh"), filepath.Join(dir, "muster"))
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "MUSTER_MESH=", "MUSTER_SPOOL=", "LANG=C")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("demo.sh: %v\n%s", err, out)
	}
	for _, want := range []string{"\n$ muster enrol list --table\n", "\n$ muster apply --config web-1/muster.toml --state web-1/state --root web-1/root\n",
		"generation 2 applied: 1 changed", "(report exited with status 5)", "\n$ muster report web-1 --fail-on none\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, out)
		}
	}
	// It ends by writing the rollout page and printing its path, where a
	// page of the demo's two hosts is.
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	m := regexp.MustCompile(`^the rollout page is (/.+\.html)$`).FindStringSubmatch(lines[len(lines)-1])
	if m == nil {
		t.Fatalf("the demo's last line is %q, want the path of the rollout page", lines[len(lines)-1])
	}
	page, err := os.ReadFile(m[1])
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<!DOCTYPE html>", "<title>muster report: generation 3</title>",
		`<tr class="failed" data-o="0"><td>web-1</td>`, `<tr class="ineligible" data-o="2"><td>web-2</td>`} {
		if !bytes.Contains(page, []byte(want)) {
			t.Errorf("the demo's page has no %s", want)
		}
	}
}
