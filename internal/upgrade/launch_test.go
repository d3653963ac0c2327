package upgrade

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

var launcher = filepath.Join(moduleRoot, "dist", "muster-launch")

// launchFixture is a root whose /usr/bin/muster follows a plan: one line
// per run, an exit status or "segv".
type launchFixture struct {
	root, state, config string
}

func newLaunchFixture(t *testing.T, plan []string, knownGood bool) *launchFixture {
	t.Helper()
	f := &launchFixture{root: t.TempDir(), state: t.TempDir(), config: filepath.Join(t.TempDir(), "muster.toml")}
	bin := filepath.Join(f.root, BinaryPath)
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	r := f.root
	writeExec(t, bin, `#!/bin/sh
echo "new $*" >>`+r+`/calls
b=$(head -n 1 `+r+`/plan)
sed -i 1d `+r+`/plan
case $b in
segv) echo "runtime: unexpected signal" >&2; kill -SEGV $$ ;;
*) echo "panic: boom" >&2; echo "goroutine 1 [running]:" >&2; exit ${b:-0} ;;
esac
`)
	if err := os.WriteFile(filepath.Join(r, "plan"), []byte(strings.Join(plan, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if knownGood {
		kg := filepath.Join(f.state, KnownGoodDir, "muster")
		if err := os.MkdirAll(filepath.Dir(kg), 0o700); err != nil {
			t.Fatal(err)
		}
		writeExec(t, kg, `#!/bin/sh
[ "$1" = version ] && { echo "muster 1.0 (go, linux/amd64)"; exit 0; }
echo "known-good $*" >>`+r+`/calls
exit 0
`)
	}
	return f
}

func writeExec(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
}

// launch runs the launcher once and returns its exit status and stderr.
func (f *launchFixture) launch(t *testing.T, env ...string) (int, string) {
	t.Helper()
	cmd := exec.Command("sh", launcher, "--timeout", "5m")
	cmd.Env = append(os.Environ(), "MUSTER_ROOT="+f.root, "MUSTER_STATE="+f.state, "MUSTER_CONFIG="+f.config)
	cmd.Env = append(cmd.Env, env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), stderr.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, stderr.String()
}

func (f *launchFixture) failures() int {
	b, err := os.ReadFile(filepath.Join(f.state, LaunchFailures))
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.Fields(string(b))[0])
	return n
}

// The launcher's whole job: tell a start that failed from a run that
// decided, count the failures in a row, and roll back after the limit —
// and never roll back to nothing, or to the binary that is failing.
func TestLauncherCounting(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		plan      []string
		knownGood bool
		missing   bool // /usr/bin/muster absent
		same      bool // the known-good copy is the failing binary
		env       []string
		statuses  []int
		failures  int // count left after the last run
		rollback  string
		stderr    string
	}{
		{name: "three failed starts roll back", plan: []string{"2", "2", "2"}, knownGood: true,
			statuses: []int{2, 2, 0}, rollback: "exit status 2 (a Go panic, or the fixed command line refused)",
			stderr: "restored the known-good muster 1.0"},
		{name: "a decision clears the count", plan: []string{"2", "2", "4", "2", "2"}, knownGood: true,
			statuses: []int{2, 2, 4, 2, 2}, failures: 2},
		{name: "failed work is no failed start", plan: []string{"1", "1", "1", "1"}, knownGood: true,
			statuses: []int{1, 1, 1, 1}},
		{name: "a crash counts", plan: []string{"segv", "segv", "segv"}, knownGood: true,
			statuses: []int{139, 139, 0}, rollback: "killed by signal 11"},
		{name: "a missing binary counts", missing: true, knownGood: true,
			statuses: []int{127, 127, 0}, rollback: "not found (status 127)"},
		{name: "a status muster never uses counts", plan: []string{"9", "9", "9"}, knownGood: true,
			statuses: []int{9, 9, 0}, rollback: "exit status 9, which muster never uses"},
		{name: "limit of one", plan: []string{"2"}, knownGood: true, env: []string{"MUSTER_LAUNCH_LIMIT=1"},
			statuses: []int{0}, rollback: "exit status 2"},
		{name: "nothing to roll back to", plan: []string{"2", "2", "2"},
			statuses: []int{2, 2, 2}, failures: 3, stderr: "no known-good muster"},
		{name: "the known-good copy is the failing one", plan: []string{"2", "2", "2"}, knownGood: true, same: true,
			statuses: []int{2, 2, 2}, failures: 3, stderr: "the known-good muster is the one failing to start"},
		{name: "restart runs the new muster at once", plan: []string{"7", "0"}, knownGood: true,
			statuses: []int{0}, stderr: "running apply with it"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newLaunchFixture(t, c.plan, c.knownGood)
			bin := filepath.Join(f.root, BinaryPath)
			if c.missing {
				os.Remove(bin)
			}
			if c.same {
				data, _ := os.ReadFile(bin)
				writeExec(t, filepath.Join(f.state, KnownGoodDir, "muster"), string(data))
			}
			var stderr string
			for i, want := range c.statuses {
				got, e := f.launch(t, c.env...)
				stderr += e
				if got != want {
					t.Fatalf("run %d: launcher exited %d, want %d; stderr:\n%s", i+1, got, want, stderr)
				}
			}
			if n := f.failures(); n != c.failures {
				t.Errorf("%d failed starts counted, want %d", n, c.failures)
			}
			if c.stderr != "" && !strings.Contains(stderr, c.stderr) {
				t.Errorf("stderr lacks %q:\n%s", c.stderr, stderr)
			}
			calls := mustRead(t, filepath.Join(f.root, "calls"))
			if !c.missing && !strings.HasPrefix(calls, "new apply --config "+f.config+" --state "+f.state+" --timeout 5m --root "+f.root+"\n") {
				t.Errorf("muster was run as:\n%s", calls)
			}
			note := filepath.Join(f.state, RollbackNote)
			if c.rollback == "" {
				if _, err := os.Stat(note); err == nil {
					t.Errorf("rolled back:\n%s", mustRead(t, note))
				}
				return
			}
			var r rollback
			if _, err := toml.DecodeFile(note, &r); err != nil {
				t.Fatalf("rollback note: %v", err)
			}
			if !strings.Contains(r.Reason, c.rollback) || r.RestoredVersion != "1.0" || r.FailedVersion != "unknown" || r.at().IsZero() {
				t.Errorf("rollback note %+v; want reason %q, restored 1.0", r, c.rollback)
			}
			if !fileEqual(t, bin, filepath.Join(f.state, KnownGoodDir, "muster")) {
				t.Error("/usr/bin/muster is not the known-good copy after the rollback")
			}
			if !strings.HasSuffix(calls, "known-good apply --config "+f.config+" --state "+f.state+" --timeout 5m --root "+f.root+"\n") {
				t.Errorf("the restored muster did not run apply once:\n%s", calls)
			}
			if strings.HasPrefix(c.rollback, "exit status 2") && r.Stderr != "panic: boom goroutine 1 [running]:" {
				t.Errorf("rollback note stderr %q", r.Stderr)
			}
		})
	}
}
