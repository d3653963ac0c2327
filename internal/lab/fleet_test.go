package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// moduleRoot is the checkout the lab builds muster and its package from.
const moduleRoot = "../.."

// fleet is a mesh on this machine and the hosts it manages.
type fleet struct {
	t     *testing.T
	ctx   context.Context
	lab   *Lab
	work  string   // the mesh's files: mesh keys, declarations, packages
	bin   string   // muster for the mesh side
	env   []string // the mesh side's environment: MUSTER_MESH, MUSTER_SPOOL
	hosts []*host
	gen   uint64
}

type host struct {
	*Machine
	state string // its state directory
	spool string // its spool, as its config names it

	mark time.Time // when the step being checked began
	seq  uint64    // its report the step being checked began after
}

// host is the host called name.
func (f *fleet) host(name string) *host {
	for _, h := range f.hosts {
		if h.Name == name {
			return h
		}
	}
	f.t.Fatalf("no host %s", name)
	return nil
}

// step announces a step of the story.
func (f *fleet) step(n int, what string) {
	f.t.Helper()
	f.t.Logf("==    step %d: %s", n, what)
}

// check logs a check that held, or fails the test with what was found.
func (f *fleet) check(ok bool, what string, found ...any) bool {
	f.t.Helper()
	if ok {
		f.t.Logf("ok    %s", what)
	} else {
		f.t.Errorf("FAIL  %s: found %s", what, fmt.Sprint(found...))
	}
	return ok
}

// mesh runs muster on the mesh side and returns its standard output.
func (f *fleet) mesh(args ...string) string {
	f.t.Helper()
	out, err := f.meshErr(args...)
	if err != nil {
		f.t.Fatalf("muster %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func (f *fleet) meshErr(args ...string) (string, error) {
	cmd := exec.CommandContext(f.ctx, f.bin, args...)
	cmd.Env = append(os.Environ(), f.env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		err = fmt.Errorf("%w: %s", err, stderr.String())
	}
	return string(out), err
}

// declare commits a generation of the declaration made of files.
func (f *fleet) declare(files map[string]string) uint64 {
	f.t.Helper()
	var names []string
	for name, body := range files {
		p := filepath.Join(f.work, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			f.t.Fatal(err)
		}
		names = append(names, p)
	}
	f.mesh(append([]string{"declare"}, names...)...)
	f.gen++
	f.t.Logf("--    declared generation %d", f.gen)
	return f.gen
}

// node is one node of `muster report --json`.
type node struct {
	Name   string `json:"name"`
	NodeID string `json:"node_id"`
	Status string `json:"status"`
	Report *struct {
		Seq    uint64    `json:"seq,string"`
		Start  time.Time `json:"start"`
		End    time.Time `json:"end"`
		Muster string    `json:"muster"`
		Notes  []string  `json:"notes"`
	} `json:"report"`
	FailedLines []struct {
		ID     string `json:"id"`
		Detail string `json:"detail"`
	} `json:"failed_lines"`
	LastApplied *uint64 `json:"last_applied"`
}

func (n node) seq() uint64 {
	if n.Report == nil {
		return 0
	}
	return n.Report.Seq
}

func (n node) failed(id, says string) bool {
	for _, l := range n.FailedLines {
		if l.ID == id && strings.Contains(l.Detail, says) {
			return true
		}
	}
	return false
}

func (n node) noted(says string) bool {
	if n.Report == nil {
		return false
	}
	for _, s := range n.Report.Notes {
		if strings.Contains(s, says) {
			return true
		}
	}
	return false
}

// report is the mesh's view of generation gen, by node name.
func (f *fleet) report(gen uint64) map[string]node {
	f.t.Helper()
	out := f.mesh("report", "--json", "--all", "--fail-on", "none", "--generation", fmt.Sprint(gen))
	var doc struct {
		Nodes []node `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		f.t.Fatalf("muster report --json: %v\n%s", err, out)
	}
	m := map[string]node{}
	for _, n := range doc.Nodes {
		m[n.Name] = n
	}
	return m
}

// await polls the report of gen until cond holds for every host named (all
// when none is), and returns it; the timer runs the applies, never the
// test.
func (f *fleet) await(gen uint64, what string, cond func(node) bool, names ...string) map[string]node {
	f.t.Helper()
	if len(names) == 0 {
		for _, h := range f.hosts {
			names = append(names, h.Name)
		}
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		r := f.report(gen)
		all := true
		for _, n := range names {
			if !cond(r[n]) {
				all = false
			}
		}
		if all {
			return r
		}
		if time.Now().After(deadline) {
			var got []string
			for _, n := range names {
				got = append(got, fmt.Sprintf("%s %s (report %d) %v", n, r[n].Status, r[n].seq(), r[n].FailedLines))
			}
			f.t.Fatalf("FAIL  generation %d: waited 3 minutes for %s; the report says %s", gen, what, strings.Join(got, "; "))
		}
		time.Sleep(2 * time.Second)
	}
}

// applied waits until every host named applied gen, and checks it.
func (f *fleet) applied(gen uint64, names ...string) map[string]node {
	f.t.Helper()
	r := f.await(gen, "a report", func(n node) bool { return n.Status != "outstanding" && n.Status != "" }, names...)
	for name, n := range r {
		if len(names) > 0 && !contains(names, name) {
			continue
		}
		f.check(n.Status == "applied", fmt.Sprintf("%s applied generation %d (muster report)", name, gen), n.Status, " ", n.FailedLines)
	}
	return r
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// in runs a command inside h and returns its trimmed output, failing the
// test if it fails.
func (f *fleet) in(h *host, args ...string) string {
	f.t.Helper()
	out, err := h.Run(f.ctx, args...)
	if err != nil {
		f.t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// sh runs a shell command line inside h.
func (f *fleet) sh(h *host, script string) string {
	f.t.Helper()
	return f.in(h, "/bin/sh", "-c", script)
}

// state is what systemctl verb unit prints inside h (is-active,
// is-enabled, is-failed), whatever its exit status.
func (f *fleet) state(h *host, verb, unit string) string {
	f.t.Helper()
	out, err := h.Run(f.ctx, "systemctl", verb, unit)
	if err != nil && f.ctx.Err() != nil {
		f.t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// version is the version muster version prints inside h.
func (f *fleet) version(h *host) string {
	f.t.Helper()
	if v := strings.Fields(f.in(h, "muster", "version")); len(v) > 1 {
		return v[1]
	}
	return ""
}

// journal is what muster-apply.service's runs printed inside h since a
// time (all of it when since is zero), with systemd's messages about the
// unit (such as "Main process exited, code=exited, status=4/...").
func (f *fleet) journal(h *host, since time.Time) string {
	f.t.Helper()
	args := []string{"journalctl", "-u", "muster-apply.service", "-o", "cat", "--no-pager"}
	if !since.IsZero() {
		args = append(args, "--since", fmt.Sprintf("@%d", since.Unix()))
	}
	return f.in(h, args...)
}

// until polls cond, a check inside h, for up to 3 minutes.
func (f *fleet) until(h *host, what string, cond func() bool) {
	f.t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			f.t.Fatalf("FAIL  %s: waited 3 minutes for %s", h.Name, what)
		}
		time.Sleep(time.Second)
	}
}

// dumpOnFailure logs, when the test failed, what each host's timer runs
// printed last, for the one reading the failure.
func (f *fleet) dumpOnFailure() {
	if !f.t.Failed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, h := range f.hosts {
		out, _ := h.Run(ctx, "journalctl", "-u", "muster-apply.service", "-o", "short-precise", "-n", "60", "--no-pager")
		f.t.Logf("lab: %s: the end of muster-apply.service's journal:\n%s", h.Name, out)
	}
}

// bench runs the services benchmark inside h and prints how long 20
// services applied with no change take beside one systemctl show of the
// same units (the target: at most twice as long).
func (f *fleet) bench(h *host, bin string) {
	f.t.Helper()
	b, err := os.ReadFile(bin)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(h.Path("/root/systemd.test"), b, 0o755); err != nil {
		f.t.Fatal(err)
	}
	// No apply of the timer's in between.
	f.in(h, "systemctl", "stop", "muster-apply.timer")
	// The backend's tests first: those that need a running systemd run
	// only in a host like this one.
	out := f.in(h, "/root/systemd.test", "-test.v", "-test.run", "^Test")
	for _, test := range []string{"TestUnitsReadLinksAsTheyAre", "TestStartFailureSaysWhy"} {
		f.check(strings.Contains(out, "--- PASS: "+test), h.Name+": the systemd backend's "+test+" passes on a running systemd", lastLines(out, 10))
	}
	out = f.in(h, "/root/systemd.test", "-test.run", "^$", "-test.bench", "^BenchmarkServicesNoop20$", "-test.benchtime", "20x", "-test.count", "3")
	ns := map[string][]float64{}
	for _, line := range strings.Split(out, "\n") {
		fields := strings.Fields(line)
		if len(fields) < 4 || !strings.HasPrefix(fields[0], "BenchmarkServicesNoop20/") || fields[3] != "ns/op" {
			continue
		}
		name := strings.TrimPrefix(fields[0], "BenchmarkServicesNoop20/")
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			name = name[:i] // the -GOMAXPROCS suffix
		}
		var v float64
		fmt.Sscan(fields[2], &v)
		ns[name] = append(ns[name], v)
	}
	apply, show := median(ns["apply"]), median(ns["systemctl-show"])
	if apply == 0 || show == 0 {
		f.t.Errorf("FAIL  the benchmark printed no timings:\n%s", out)
		return
	}
	verdict := "within"
	if apply > 2*show {
		verdict = "NOT within"
	}
	f.t.Logf("bench %s: 20 services, no change: apply %.1f ms, one systemctl show %.1f ms: %.2f×, %s the target of 2× (median of 3 runs of 20)",
		h.Name, apply/1e6, show/1e6, apply/show, verdict)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// unit is what systemctl show says of a unit inside h.
func (f *fleet) unit(h *host, unit string) map[string]string {
	f.t.Helper()
	out := f.in(h, "systemctl", "show", "-p", "ActiveState,SubState,UnitFileState,MainPID,NeedDaemonReload,ExecMainStatus,Result,NRestarts", unit)
	m := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		k, v, _ := strings.Cut(l, "=")
		m[k] = v
	}
	return m
}

// ask is labd's answer inside h on socket.
func (f *fleet) ask(h *host, socket string) string {
	f.t.Helper()
	out, err := h.Run(f.ctx, "labd", "ask", socket)
	if err != nil {
		return "no answer: " + err.Error()
	}
	return strings.TrimSpace(out)
}

func field(answer, key string) string {
	for _, f := range strings.Fields(answer) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

// build runs go build for the machine's architecture, static, with the
// version stamped and tags, into out.
func build(t *testing.T, out, pkg, version string, tags ...string) {
	t.Helper()
	args := []string{"build", "-trimpath", "-ldflags", "-s -w -X github.com/muster-tool/muster/internal/cli.version=" + version}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	cmd := exec.Command("go", append(args, "-o", out, pkg)...)
	cmd.Dir = moduleRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
}

// buildTest builds the test binary of pkg into out, static, for a host.
func buildTest(t *testing.T, out, pkg string) {
	t.Helper()
	cmd := exec.Command("go", "test", "-c", "-trimpath", "-o", out, pkg)
	cmd.Dir = moduleRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go test -c %s: %v\n%s", pkg, err, b)
	}
}

// musterDeb builds muster's package of version with scripts/deb.sh, as
// make deb does, from binary (built by deb.sh itself when empty).
func musterDeb(t *testing.T, dir, version, binary string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(moduleRoot, "scripts", "deb.sh"), version, dir)
	cmd.Env = append(os.Environ(), "DEB_COMPRESS=gzip")
	if binary != "" {
		cmd.Env = append(cmd.Env, "MUSTER_BINARY="+binary)
	}
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/deb.sh %s: %v\n%s", version, err, b)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// labdDeb builds the package of the lab's daemon: its binary and its own
// systemd unit, as a packaged daemon comes.
func labdDeb(t *testing.T, dir string) string {
	t.Helper()
	tree := filepath.Join(dir, "labd-tree")
	for _, d := range []string{"DEBIAN", "usr/bin", "lib/systemd/system"} {
		if err := os.MkdirAll(filepath.Join(tree, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	build(t, filepath.Join(tree, "usr/bin/labd"), "./internal/lab/labd", "")
	unit := `[Unit]
Description=lab daemon: answers on /run/labd.sock

[Service]
Type=notify
ExecStart=/usr/bin/labd /etc/labd/labd.conf /run/labd.sock

[Install]
WantedBy=multi-user.target
`
	arch, err := exec.Command("dpkg", "--print-architecture").Output()
	if err != nil {
		t.Fatal(err)
	}
	control := fmt.Sprintf("Package: labd\nVersion: 1.0\nArchitecture: %s\nMaintainer: lab <lab@muster-tool.invalid>\nDescription: the lab's daemon\n", strings.TrimSpace(string(arch)))
	for p, body := range map[string]string{"lib/systemd/system/labd.service": unit, "DEBIAN/control": control} {
		if err := os.WriteFile(filepath.Join(tree, p), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	deb := filepath.Join(dir, "labd_1.0.deb")
	if b, err := exec.Command("dpkg-deb", "--root-owner-group", "-Zgzip", "--build", tree, deb).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb: %v\n%s", err, b)
	}
	return deb
}

// debVersion is the Debian version make deb gives this checkout.
func debVersion(t *testing.T) string {
	desc, err := exec.Command("git", "-C", moduleRoot, "describe", "--tags", "--always", "--dirty").Output()
	if err != nil {
		desc = []byte("devel")
	}
	out, err := exec.Command(filepath.Join(moduleRoot, "scripts", "deb.sh"), "--print-version", strings.TrimSpace(string(desc))).Output()
	if err != nil {
		t.Fatalf("scripts/deb.sh --print-version: %v", err)
	}
	return strings.TrimSpace(string(out))
}
