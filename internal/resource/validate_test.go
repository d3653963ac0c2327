package resource

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/outcome"
)

// The validate tests run real commands: sh -n, which parses a shell script
// without running it, and small scripts of their own.
func needSh(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
}

// New content that passes its validate command replaces the old; content
// that fails keeps the old file, fails the line with the status and the
// command's own words, leaves no temp file and restarts nothing.
func TestValidateGuardsTheRename(t *testing.T) {
	needSh(t)
	root := newRoot(t)
	_, sv := newFakes()
	sv.active["web.service"] = true
	s := &System{Root: root, Services: sv}
	web := Spec{Kind: Service, Name: "web.service", RestartOn: []string{"/etc/web/run.sh"}}
	conf := func(content string) Spec {
		return Spec{Kind: File, Path: "/etc/web/run.sh", Content: content, Validate: []string{"sh", "-n", "%s"}}
	}

	res := apply(t, s, conf("echo one\n"), web)
	wantStatus(t, res, "file:/etc/web/run.sh", outcome.Changed)
	if got := read(t, root, "/etc/web/run.sh"); got != "echo one\n" {
		t.Fatalf("valid content not written: %q", got)
	}
	sv.calls = nil

	res = apply(t, s, conf("if then fi (\n"), web)
	r := wantStatus(t, res, "file:/etc/web/run.sh", outcome.Failed)
	for _, want := range []string{`new content refused: validate "sh -n %s" exited with status 2 (/etc/web/run.sh left as it was); output: /etc/web/run.sh: 1: Syntax error: `} {
		if !strings.Contains(r.Detail, want) {
			t.Errorf("detail %q lacks %q", r.Detail, want)
		}
	}
	if strings.Contains(r.Detail, ".muster-") || strings.Contains(r.Detail, root) {
		t.Errorf("detail %q names the temp file; it should name the declared path", r.Detail)
	}
	if got := read(t, root, "/etc/web/run.sh"); got != "echo one\n" {
		t.Errorf("old content replaced by content that failed validation: %q", got)
	}
	wantStatus(t, res, web.ID(), outcome.OK)
	if len(sv.calls) != 0 {
		t.Errorf("a file that failed validation restarted its service: %q", sv.calls)
	}
	noTemps(t, root)

	// The next run tries again, and still keeps the old content.
	res = apply(t, s, conf("if then fi (\n"), web)
	wantStatus(t, res, "file:/etc/web/run.sh", outcome.Failed)
	if got := read(t, root, "/etc/web/run.sh"); got != "echo one\n" {
		t.Errorf("second run replaced the old content: %q", got)
	}
}

// Two files restart one service; when one of them fails validation the
// other is installed but the service is not restarted on half a change.
func TestValidateFailureHoldsBackRestart(t *testing.T) {
	needSh(t)
	root := newRoot(t)
	_, sv := newFakes()
	sv.active["web.service"] = true
	s := &System{Root: root, Services: sv}
	web := Spec{Kind: Service, Name: "web.service", RestartOn: []string{"/etc/web/a.sh", "/etc/web/b.sh"}}
	a := Spec{Kind: File, Path: "/etc/web/a.sh", Content: "echo a\n"}
	b := Spec{Kind: File, Path: "/etc/web/b.sh", Content: "fi fi (\n", Validate: []string{"sh", "-n", "%s"}}
	res := apply(t, s, a, b, web)
	wantStatus(t, res, a.ID(), outcome.Changed)
	wantStatus(t, res, b.ID(), outcome.Failed)
	if r := wantStatus(t, res, web.ID(), outcome.OK); !strings.Contains(r.Detail, "not restarted: the new content of /etc/web/b.sh failed its validate command") {
		t.Errorf("service detail %q", r.Detail)
	}
	if len(sv.calls) != 0 {
		t.Errorf("restarted: %q", sv.calls)
	}
	if exists(root, "/etc/web/b.sh") {
		t.Error("a new file that failed validation was created")
	}
}

// The command sees the staged file with its new content, mode and owner,
// and %s is replaced wherever it appears; through the shell only when the
// spec says so.
func TestValidateSeesStagedFile(t *testing.T) {
	needSh(t)
	root := newRoot(t)
	s := &System{Root: root}
	script := filepath.Join(t.TempDir(), "check")
	write(t, "/", script, "#!/bin/sh\n[ \"$(cat \"$1\")\" = ok ] && [ \"$(stat -c %a \"$1\")\" = 640 ] && [ \"$2\" = \"--file=$1\" ]\n")
	chmod(t, script, 0o755)
	spec := Spec{Kind: File, Path: "/etc/app.conf", Content: "ok", Mode: "0640", Validate: []string{script, "%s", "--file=%s"}}
	wantStatus(t, apply(t, s, spec), spec.ID(), outcome.Changed)

	// Without validate_shell, shell syntax is one more word for the
	// program: "sh -n %s; exit 1" would parse the file and the literal
	// word "exit" would be a file that does not exist.
	noShell := Spec{Kind: File, Path: "/etc/a.sh", Content: "echo a\n", Validate: []string{"true", "%s;", "exit", "1"}}
	wantStatus(t, apply(t, s, noShell), noShell.ID(), outcome.Changed)
	shell := Spec{Kind: File, Path: "/etc/b.sh", Content: "echo b\n", Validate: []string{"sh -n %s; exit 3"}, ValidateShell: true}
	r := wantStatus(t, apply(t, s, shell), shell.ID(), outcome.Failed)
	if !strings.Contains(r.Detail, "exited with status 3") {
		t.Errorf("shell detail %q", r.Detail)
	}
	// The path is quoted for the shell: a declared name with a space and
	// a quote still reaches the command as one word.
	odd := Spec{Kind: File, Path: "/etc/it's a.sh", Content: "echo c\n", Validate: []string{`test -s %s`}, ValidateShell: true}
	wantStatus(t, apply(t, s, odd), odd.ID(), outcome.Changed)
}

// A secret file's validate output is never shown, and a line of any other
// file's validate output that quotes secret content is withheld.
func TestValidateOutputKeepsSecrets(t *testing.T) {
	needSh(t)
	root := newRoot(t)
	s := &System{Root: root}
	write(t, root, "/etc/key", "hunter2-secret-token\n") // in place before the run
	secret := Spec{Kind: File, Path: "/etc/key", Content: "hunter2-secret-token\n", Secret: true}
	leaky := Spec{Kind: File, Path: "/etc/leaky.conf", Content: "include /etc/key\n",
		Validate: []string{"sh -c 'echo bad line; cat \"$1\"; cat " + filepath.Join(root, "etc/key") + "; exit 1' sh %s"}, ValidateShell: true}
	res := apply(t, s, secret, leaky)
	r := wantStatus(t, res, leaky.ID(), outcome.Failed)
	if strings.Contains(r.Detail, "hunter2") {
		t.Errorf("secret content in a validate detail: %q", r.Detail)
	}
	if !strings.Contains(r.Detail, "bad line / include /etc/key / (a line that quotes secret content is not shown)") {
		t.Errorf("detail %q", r.Detail)
	}

	own := Spec{Kind: File, Path: "/etc/key2", Content: "another-secret\n", Secret: true,
		Validate: []string{"sh", "-c", "cat \"$1\"; exit 1", "sh", "%s"}}
	r = wantStatus(t, apply(t, s, own), own.ID(), outcome.Failed)
	if strings.Contains(r.Detail, "another-secret") || !strings.Contains(r.Detail, "its output is not shown: the file is secret") {
		t.Errorf("secret file's validate detail %q", r.Detail)
	}
}

// A command that does not exist, and one that outlives ValidateTimeout
// (shortened by the context here), fail the line and keep the old file.
func TestValidateCannotRunOrHangs(t *testing.T) {
	needSh(t)
	root := newRoot(t)
	write(t, root, "/etc/x", "old")
	s := &System{Root: root}
	missing := Spec{Kind: File, Path: "/etc/x", Content: "new", Validate: []string{"/nonexistent/validator", "%s"}}
	r := wantStatus(t, apply(t, s, missing), missing.ID(), outcome.Failed)
	if !strings.Contains(r.Detail, "could not run") || read(t, root, "/etc/x") != "old" {
		t.Errorf("detail %q, content %q", r.Detail, read(t, root, "/etc/x"))
	}

	// A sleeper whose child keeps the output open: the whole process
	// group goes when the time is up.
	hang := Spec{Kind: File, Path: "/etc/x", Content: "new", Validate: []string{"sh -c 'sleep 60 & sleep 60' %s"}, ValidateShell: true}
	start := time.Now()
	defer func(d time.Duration) { validateTimeout = d }(validateTimeout)
	validateTimeout = 300 * time.Millisecond
	r = wantStatus(t, apply(t, s, hang), hang.ID(), outcome.Failed)
	if !strings.Contains(r.Detail, "did not finish within 300ms and was killed") || read(t, root, "/etc/x") != "old" {
		t.Errorf("detail %q", r.Detail)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("a hanging validate held the run for %s", d)
	}
	noTemps(t, root)
}

// Only a rewrite runs the command: a file whose content is already right
// is not validated again, and a dry run never runs it.
func TestValidateOnlyOnRewrite(t *testing.T) {
	needSh(t)
	root := newRoot(t)
	marker := filepath.Join(t.TempDir(), "ran")
	spec := Spec{Kind: File, Path: "/etc/y", Content: "y\n", Validate: []string{"sh -c 'echo x >> " + marker + "' %s"}, ValidateShell: true}
	wantStatus(t, apply(t, &System{Root: root, DryRun: true}, spec), spec.ID(), outcome.Changed)
	if exists("/", marker) {
		t.Fatal("a dry run ran the validate command")
	}
	wantStatus(t, apply(t, &System{Root: root}, spec), spec.ID(), outcome.Changed)
	wantStatus(t, apply(t, &System{Root: root}, spec), spec.ID(), outcome.OK)
	if got := read(t, "/", marker); got != "x\n" {
		t.Errorf("validate ran %d times, want once", strings.Count(got, "x"))
	}
}

func TestValidateChecks(t *testing.T) {
	for _, c := range []struct {
		spec Spec
		want string
	}{
		{Spec{Kind: File, Path: "/a", Validate: []string{"nginx", "-t"}}, "never names the new file"},
		{Spec{Kind: File, Path: "/a", Validate: []string{"", "%s"}}, "names no command"},
		{Spec{Kind: File, Path: "/a", Validate: []string{"a %s", "b"}, ValidateShell: true}, "one string, not 2 words"},
		{Spec{Kind: File, Path: "/a", ValidateShell: true}, "validate_shell: says how to run validate"},
		{Spec{Kind: File, Path: "/a", Validate: []string{"x\n%s"}}, "control character"},
		{Spec{Kind: Directory, Path: "/a", Validate: []string{"x", "%s"}}, "validate: does not apply to a directory"},
		{Spec{Kind: File, Path: "/a", State: "absent", Validate: []string{"x", "%s"}}, "declared absent"},
	} {
		bad := Check(&c.spec)
		if len(bad) == 0 || !slices.ContainsFunc(bad, func(v Invalid) bool { return strings.Contains(v.Error(), c.want) }) {
			t.Errorf("Check(%+v) = %v, want %q", c.spec, bad, c.want)
		}
	}
}

func chmod(t *testing.T, p string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}
