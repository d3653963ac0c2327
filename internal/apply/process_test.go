package apply_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/apply"
	"github.com/muster-tool/muster/internal/atomicfile"
	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/cli"
)

// Faults are tested on a real muster process: killed, locked out, with its
// real exit status. The first test that needs one builds cmd/muster
// (without the race detector, so a run takes as long as it does for users);
// where the go tool is missing, the test binary re-executes itself as
// muster.
const asMuster = "MUSTER_APPLY_TEST_AS_MUSTER"

var (
	buildOnce sync.Once
	musterBin string
	binDir    string
)

func TestMain(m *testing.M) {
	if os.Getenv(asMuster) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := cli.Main(ctx, os.Args[1:], cli.Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
		stop()
		os.Exit(code)
	}
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// buildMuster builds cmd/muster once, or leaves musterBin empty.
func buildMuster() {
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "muster-apply-test-")
		if err != nil {
			return
		}
		binDir = dir
		gotool, err := exec.LookPath("go")
		if err != nil {
			return
		}
		bin := filepath.Join(dir, "muster")
		build := exec.Command(gotool, "build", "-o", bin, "github.com/muster-tool/muster/cmd/muster")
		build.Env = append(os.Environ(), "GOFLAGS=")
		if out, err := build.CombinedOutput(); err == nil {
			musterBin = bin
		} else {
			fmt.Fprintf(os.Stderr, "building muster failed (%v), re-executing the test binary instead:\n%s", err, out)
		}
	})
}

// command returns muster as a process for host h: `muster ARGS --config
// ... --root ...`.
func (h *testHost) command(args ...string) *exec.Cmd {
	buildMuster()
	args = append(args, "--config", h.config, "--root", h.root)
	cmd := exec.Command(musterBin, args...)
	if musterBin == "" {
		cmd = exec.Command(os.Args[0], args...)
	}
	cmd.Env = append(os.Environ(), asMuster+"=1", "MUSTER_SPOOL=", "MUSTER_MESH=")
	return cmd
}

// run runs muster for h to the end and returns its output and exit status.
func (h *testHost) run(t testing.TB, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := h.command(args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// The exit status of every outcome a timer or cron sees, from the real
// process.
func TestExitStatus(t *testing.T) {
	f := newFixture(t)
	h := f.enrol("web-1")
	f.declare(siteFiles)

	out, errs, code := h.run(t, "apply")
	if code != 0 || !strings.Contains(out, "generation 1 applied: 4 changed, 0 removed, 0 unchanged, 0 failed") {
		t.Fatalf("first apply: status %d\n%s%s", code, out, errs)
	}
	out, errs, code = h.run(t, "apply")
	if code != 0 || out != "generation 1 applied: no change, 4 resources verified\n" || errs != "" {
		t.Fatalf("no-op apply: status %d, stdout %q, stderr %q; want 0 and one summary line", code, out, errs)
	}

	// A failed line: status 1, the line on stdout.
	if err := os.Remove(filepath.Join(h.root, "etc/motd")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(h.root, "etc/motd"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, _, code = h.run(t, "apply")
	if code != 1 || !strings.Contains(out, "failed   file:/etc/motd: ") || !strings.Contains(out, "1 failed") {
		t.Errorf("failed line: status %d, stdout %q; want 1 and the failed line", code, out)
	}
	os.Remove(filepath.Join(h.root, "etc/motd"))

	// Another apply holds the lock: status 4 at once, naming its pid.
	inside, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		first := true
		_, err := f.apply(h, func(o *apply.Options) {
			o.Now = func() time.Time {
				if first {
					first = false
					close(inside)
					<-release
				}
				return time.Now()
			}
		})
		done <- err
	}()
	<-inside
	start := time.Now()
	_, errs, code = h.run(t, "apply")
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("muster: error: another apply is running (pid %d)\n", os.Getpid()); code != 4 || errs != want {
		t.Errorf("apply while another runs: status %d, stderr %q; want 4 and %q", code, errs, want)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the second apply waited %s for the lock instead of exiting at once", d)
	}

	// The spool cannot be written: the report waits, status 4 says so.
	t.Run("unwritable spool", func(t *testing.T) {
		unwritable(t, filepath.Join(f.spool, "report"))
		out, errs, code := h.run(t, "apply")
		if code != 4 || !strings.Contains(errs, "report kept in the outbox") || !strings.Contains(out, "no change") {
			t.Errorf("unwritable spool: status %d\n%s%s", code, out, errs)
		}
	})
	out, errs, code = h.run(t, "apply")
	if code != 0 || !strings.Contains(errs, "sent 1 earlier report(s) from the outbox") {
		t.Errorf("spool writable again: status %d\n%s%s", code, out, errs)
	}

	// A rollback: status 3, naming both generations.
	before2 := filepath.Join(f.dir, "spool-before-2")
	copyTree(t, f.spool, before2)
	f.declare(siteFiles + "\n[role.all.file.\"/etc/two\"]\ncontent = \"2\\n\"\n")
	if _, _, code := h.run(t, "apply"); code != 0 {
		t.Fatalf("apply of generation 2: status %d", code)
	}
	_, errs, code = h.run(t, "apply", "--spool", before2)
	if code != 3 || !strings.Contains(errs, "rollback refused") || !strings.Contains(errs, "generation 1") || !strings.Contains(errs, "generation 2") {
		t.Errorf("rollback: status %d, stderr %q", code, errs)
	}

	// A corrupt state file: refused (it does not authenticate), the file
	// and the way out named.
	state := filepath.Join(h.state, "state.toml")
	writeFile(t, state, "generation = ")
	_, errs, code = h.run(t, "apply")
	if code != 3 || !strings.Contains(errs, "muster: error: state file "+state+" refused: it is corrupt") || !strings.Contains(errs, "muster: hint: ") || !strings.Contains(errs, "mv "+state) {
		t.Errorf("corrupt state: status %d, stderr %q", code, errs)
	}
}

// Secrets never reach output, logs, reports or host state: not on success,
// not in a dry run, not in a failed line, not in drift.
func TestSecretNeverShown(t *testing.T) {
	const secret = "hunter2-s3cr3t-value"
	f := newFixture(t)
	h := f.enrol("web-1")
	f.declare(everyNode + `
[role.all.file."/etc/app/token"]
content = "` + secret + `\n"
secret = true
mode = "0600"

[role.all.file."/etc/app.d/token"]
content = "` + secret + `-2\n"
secret = true
`)
	// /etc/app.d is a file: the second secret's line fails.
	writeFile(t, filepath.Join(h.root, "etc/app.d"), "in the way\n")
	var outputs []string
	for _, args := range [][]string{{"apply", "--dry-run"}, {"apply"}, {"apply"}} {
		out, errs, _ := h.run(t, args...)
		outputs = append(outputs, out, errs)
		// Drift for the next run: the secret file is changed by hand.
		writeFile(t, filepath.Join(h.root, "etc/app/token"), "changed by hand\n")
	}
	for _, o := range outputs {
		if strings.Contains(o, "hunter2") {
			t.Errorf("output shows the secret:\n%s", o)
		}
	}
	reps := f.reports(h)
	if len(reps) != 2 {
		t.Fatalf("%d reports, want 2", len(reps))
	}
	for _, r := range reps {
		var buf bytes.Buffer
		fmt.Fprintf(&buf, "%v %v %v", r.Lines, r.Notes, r.Ledger)
		if strings.Contains(buf.String(), "hunter2") {
			t.Errorf("report (decrypted with the mesh key) shows the secret: %s", buf.String())
		}
	}
	if l := lineOf(t, reps[0], "file:/etc/app.d/token"); l.Status != "failed" {
		t.Errorf("second secret's line: %s", l.Status)
	}
	filepath.WalkDir(h.state, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, _ := os.ReadFile(path); bytes.Contains(b, []byte("hunter2")) {
				t.Errorf("host state file %s holds the secret", path)
			}
		}
		return nil
	})
}

// declareByProcess is declare run as `muster declare`: without the race
// detector it is many times faster, which the kill test needs.
func (f *fixture) declareByProcess(src string) uint64 {
	f.t.Helper()
	buildMuster()
	if musterBin == "" {
		return f.declare(src)
	}
	path := filepath.Join(f.dir, "site.toml")
	writeFile(f.t, path, src)
	cmd := exec.Command(musterBin, "declare", "--mesh", filepath.Join(f.dir, "mesh"), "--spool", f.spool, path)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		f.t.Fatalf("muster declare: %v\n%s%s", err, out, errb.String())
	}
	var gen uint64
	if _, err := fmt.Sscanf(string(out), "generation %d declared", &gen); err != nil {
		f.t.Fatalf("muster declare said %q", out)
	}
	return gen
}

// payload is a file's content in generation gen: big enough that writing
// 200 of them takes a while, and different in every generation.
func payload(gen uint64, i int) string {
	head := fmt.Sprintf("generation %d file %d\n", gen, i)
	word := fmt.Sprintf("%d-%d ", gen, i)
	return head + strings.Repeat(word, 512/len(word)) + "\n"
}

func killDeclaration(gen uint64, n int) string {
	var b strings.Builder
	b.WriteString(everyNode)
	for i := range n {
		fmt.Fprintf(&b, "[role.all.file.\"/data/f%03d\"]\ncontent = %q\nmode = \"0640\"\n\n", i, payload(gen, i))
	}
	return b.String()
}

// snapshot reads every entry of dir: name to content; temp files are
// counted apart.
func snapshot(dir string) (files map[string]string, temps int, err error) {
	files = map[string]string{}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return files, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	for _, e := range ents {
		if atomicfile.IsTemp(e.Name()) {
			temps++
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, 0, err
		}
		files[e.Name()] = string(b)
	}
	return files, temps, nil
}

// killTally counts where the kills landed.
type killTally struct {
	before, mixed, after, finished int
}

// killOnce starts an apply on h, kills it after a random delay below
// limit, and checks what it left: every file in dir is either its content
// in old or its content in generation gen; the state files load (a dry run
// of the real binary reads them); every report in the outbox is a whole
// bundle.
func killOnce(h *testHost, gen uint64, files int, limit time.Duration, tally *killTally) error {
	dir := filepath.Join(h.root, "data")
	old, _, err := snapshot(dir)
	if err != nil {
		return err
	}
	cmd := h.command("apply")
	if err := cmd.Start(); err != nil {
		return err
	}
	time.Sleep(time.Duration(rand.Int64N(int64(limit))))
	cmd.Process.Signal(syscall.SIGKILL)
	if cmd.Wait() == nil {
		tally.finished++
	}
	got, _, err := snapshot(dir)
	if err != nil {
		return err
	}
	nOld, nNew := 0, 0
	for name, content := range got {
		var i int
		if _, err := fmt.Sscanf(name, "f%03d", &i); err != nil || i >= files {
			return fmt.Errorf("unexpected file /data/%s", name)
		}
		switch content {
		case payload(gen, i):
			nNew++
		case old[name]:
			nOld++
		default:
			return fmt.Errorf("/data/%s is neither its old nor its new content: %.60q", name, content)
		}
	}
	switch {
	case nNew == 0:
		tally.before++
	case nOld == 0:
		tally.after++
	default:
		tally.mixed++
	}
	check := h.command("apply", "--dry-run")
	if out, err := check.CombinedOutput(); err != nil {
		return fmt.Errorf("state after the kill does not load: %v\n%s", err, out)
	}
	ents, _ := os.ReadDir(filepath.Join(h.state, "outbox"))
	for _, e := range ents {
		if atomicfile.IsTemp(e.Name()) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(h.state, "outbox", e.Name()))
		if err != nil {
			return err
		}
		if _, err := bundle.Inspect(b); err != nil {
			return fmt.Errorf("outbox report %s is not a whole bundle: %v", e.Name(), err)
		}
	}
	return nil
}

// SIGKILL at random points, over and over, while every run rewrites 200
// files: no declared file is ever anything but absent, its old content or
// its new content; the state files always load; every report waiting in the
// outbox is a whole bundle; and an uninterrupted run converges. Four hosts
// are killed side by side to keep the test short.
func TestKilledApplyNeverLeavesHalfWrittenFiles(t *testing.T) {
	const files, hosts = 200, 4
	rounds := 50 // 200 kills
	if testing.Short() {
		rounds = 5
	}
	f := newFixture(t)
	var hs []*testHost
	for i := range hosts {
		hs = append(hs, f.enrol(fmt.Sprintf("web-%d", i)))
	}

	gen := f.declare(killDeclaration(1, files))
	for _, h := range hs {
		if out, errs, code := h.run(t, "apply"); code != 0 {
			t.Fatalf("first apply: status %d\n%s%s", code, out, errs)
		}
	}
	// An uninterrupted round that rewrites every file on every host at
	// once sets the pace for the kill points.
	gen = f.declare(killDeclaration(2, files))
	start := time.Now()
	var wg sync.WaitGroup
	for _, h := range hs {
		wg.Go(func() { h.command("apply").Run() })
	}
	wg.Wait()
	pace := time.Since(start)
	t.Logf("a round of %d hosts rewriting %d files each takes %s", hosts, files, pace)

	converge := func() {
		t.Helper()
		for _, h := range hs {
			out, errs, code := h.run(t, "apply")
			if code != 0 {
				t.Fatalf("%s: uninterrupted apply after kills: status %d\n%s%s", h.name, code, out, errs)
			}
			got, _, err := snapshot(filepath.Join(h.root, "data"))
			if err != nil {
				t.Fatal(err)
			}
			for i := range files {
				if name := fmt.Sprintf("f%03d", i); got[name] != payload(gen, i) {
					t.Fatalf("%s: after an uninterrupted run, /data/%s holds %.40q, want generation %d", h.name, name, got[name], gen)
				}
			}
			// Temp files a killed run left beside the declared files
			// are swept by the next run, as are the state directory's.
			for _, d := range []string{h.state, filepath.Join(h.state, "outbox"), filepath.Join(h.root, "data")} {
				ents, _ := os.ReadDir(d)
				for _, e := range ents {
					if atomicfile.IsTemp(e.Name()) {
						t.Errorf("%s: temp file %s left in %s after an uninterrupted run", h.name, e.Name(), d)
					}
				}
			}
			if n := len(outbox(t, h)); n != 0 {
				t.Errorf("%s: %d reports still in the outbox after an uninterrupted run", h.name, n)
			}
		}
	}

	tallies := make([]killTally, hosts)
	for r := range rounds {
		gen = f.declareByProcess(killDeclaration(uint64(r+3), files))
		errs := make([]error, hosts)
		for i, h := range hs {
			wg.Go(func() { errs[i] = killOnce(h, gen, files, pace*6/5, &tallies[i]) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d, %s: %v", r, hs[i].name, err)
			}
		}
		if r%10 == 9 {
			converge()
		}
	}
	converge()
	var sum killTally
	temps := 0
	for i, h := range hs {
		sum.before += tallies[i].before
		sum.mixed += tallies[i].mixed
		sum.after += tallies[i].after
		sum.finished += tallies[i].finished
		_, n, _ := snapshot(filepath.Join(h.root, "data"))
		temps += n
	}
	t.Logf("%d kills: %d before any file changed, %d with some files changed, %d after all changed (%d runs finished first)",
		rounds*hosts, sum.before, sum.mixed, sum.after, sum.finished)
	if temps > 0 {
		t.Errorf("%d temp files of killed runs remain in the hosts' /data after uninterrupted runs", temps)
	}
}

// A host command run by a user who cannot read the state directory says
// so and says to run as root, rather than that the host is not enrolled
// (whose way out, join --force, would replace a working identity).
func TestNotRootSaysPermissionDenied(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run muster as another user")
	}
	f := newFixture(t)
	h := f.enrol("web-1")
	f.declare(siteFiles)
	// Everything on the way is open to others but the state directory,
	// as on a real host: the test's own directories, up to the one the
	// testing package made (never above it).
	top := filepath.Dir(f.dir)
	for d := filepath.Dir(h.config); ; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if d == top {
			break
		}
	}
	os.Chmod(h.config, 0o644)
	buildMuster()
	if musterBin == "" {
		t.Skip("the muster binary could not be built")
	}
	os.Chmod(filepath.Dir(musterBin), 0o755)
	cmd := h.command("apply")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("apply as nobody: %v, stderr %q", err, errb.String())
	}
	if s := errb.String(); !strings.Contains(s, "permission denied") || !strings.Contains(s, "muster: hint: run muster as root") || strings.Contains(s, "not enrolled") {
		t.Errorf("stderr %q", s)
	}
}
