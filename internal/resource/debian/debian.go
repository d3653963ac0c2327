// Package debian is the dpkg/apt backend of resource.Packages: it reads
// which packages are installed straight from the dpkg status file and
// changes them with apt-get, inside a root directory that is either the
// running system ("/") or a scratch root such as an image being built.
//
// Under a scratch root every piece of apt and dpkg state lives inside it,
// and nothing of the machine's own is read or written: apt is started with
// APT_CONFIG naming a generated file that sets Dir to the root, so the
// root's etc/apt (sources, apt.conf.d, preferences, keys), var/lib/apt,
// var/cache/apt, var/log/apt and var/lib/dpkg/status are used and the
// machine's /etc/apt/apt.conf.d (with its hooks) is never read; dpkg is
// passed --root (which also puts its database in ROOT/var/lib/dpkg) and
// --log=ROOT/var/log/dpkg.log. The apt and dpkg programs themselves, and
// dpkg's own /etc/dpkg/dpkg.cfg.d, are the machine's. Extra apt settings
// (Options.Config) are passed as -o after that and override it, except
// Dir::Etc::parts and Dir::Etc::main, which apt reads before any -o. Package
// lists are refreshed with apt-get update only when Options.Update asks,
// at most once per Apt value, before its first Candidate or Install.
// Maintainer scripts run chrooted into the root, so packages with scripts
// need a root that can run them.
package debian

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/resource"
)

var _ resource.Packages = (*Apt)(nil)

// Options tune how Apt drives apt.
type Options struct {
	// Config holds extra apt configuration items as "Name=value", each
	// passed as -o (for example "Dir::Etc::sourcelist=/srv/repo/sources.list"
	// or "Acquire::Retries=3"). Later items override earlier ones.
	Config []string
	// Update runs apt-get update once, before the first Candidate or
	// Install, so "latest" and exact versions are looked up in fresh
	// lists. A failed update fails that call.
	Update bool
	// LockWait is how long apt waits for the dpkg lock when another
	// package manager holds it; zero fails at once. Either way a lock
	// still held is reported as a temporary error.
	LockWait time.Duration
}

// Apt manages Debian packages inside one root. Its methods may be called
// from several goroutines; the apt and dpkg runs are serialized.
type Apt struct {
	root string
	opts Options

	mu          sync.Mutex
	updated     bool
	forceUpdate bool
}

// New returns the backend for root: "/" for the running system, or the
// directory of a scratch root (see PrepareRoot). A relative root is taken
// from the working directory.
func New(root string, opts Options) *Apt {
	if root == "" {
		root = "/"
	}
	if abs, err := filepath.Abs(root); err == nil {
		root = abs
	}
	return &Apt{root: filepath.Clean(root), opts: opts}
}

// Root returns the root the backend acts in.
func (a *Apt) Root() string { return a.root }

func (a *Apt) scratch() bool { return a.root != "/" }

func (a *Apt) admindir() string { return filepath.Join(a.root, "var/lib/dpkg") }

// Installed reads the installed version of each name from the root's dpkg
// database in one pass over the status file. A name may carry an
// architecture ("libc6:amd64"); a bare name matches the package of any
// architecture.
func (a *Apt) Installed(ctx context.Context, names []string) (map[string]string, error) {
	if len(names) == 0 {
		return map[string]string{}, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	q := newStatusQuery(names)
	if err := readStatus(a.admindir(), q); err != nil {
		return nil, fmt.Errorf("installed packages under %s: %w", a.root, err)
	}
	return q.found, nil
}

// Candidate returns the version apt would install for name now, as
// apt-cache policy reports it (pins and priorities included).
func (a *Apt) Candidate(ctx context.Context, name string) (string, error) {
	if err := checkName(name); err != nil {
		return "", err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.updateOnce(ctx); err != nil {
		return "", err
	}
	out, err := a.run(ctx, "apt-cache", "policy", name)
	if err != nil {
		return "", fmt.Errorf("candidate of package %s%s: %w", name, a.under(), err)
	}
	v := parseCandidate(out, name)
	if v == "" {
		return "", fault.WithHint(
			fmt.Errorf("candidate of package %s%s: no repository offers it", name, a.under()),
			"check the apt sources for the package and that their lists are up to date")
	}
	return v, nil
}

// parseCandidate finds the Candidate line in apt-cache policy output for
// name. "(none)" and a missing section both mean no candidate.
func parseCandidate(out []byte, name string) string {
	in := false
	for _, line := range strings.Split(string(out), "\n") {
		if line != "" && line[0] != ' ' {
			head := strings.TrimSuffix(line, ":")
			in = head == name || strings.HasPrefix(head, name+":")
			continue
		}
		if !in {
			continue
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "Candidate:"); ok {
			v = strings.TrimSpace(v)
			if v == "(none)" {
				return ""
			}
			return v
		}
	}
	return ""
}

// Install installs each package at its version ("" for the candidate),
// all in one apt-get run so dependencies are solved together. An exact
// version may be older than the installed one.
func (a *Apt) Install(ctx context.Context, want map[string]string) error {
	if len(want) == 0 {
		return nil
	}
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	args := []string{"install", "-y", "--no-install-recommends", "--allow-downgrades",
		"-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold"}
	var items []string
	for _, n := range names {
		if err := checkName(n); err != nil {
			return err
		}
		item := n
		if v := want[n]; v != "" {
			if err := checkVersion(n, v); err != nil {
				return err
			}
			item += "=" + v
		}
		items = append(items, item)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.updateOnce(ctx); err != nil {
		return err
	}
	if _, err := a.run(ctx, "apt-get", append(args, items...)...); err != nil {
		return fmt.Errorf("install %s%s: %w", strings.Join(items, " "), a.under(), err)
	}
	return nil
}

// Remove removes the named packages, keeping their configuration files as
// apt-get remove does. Names that are not installed are left alone, so
// removing something already gone is not an error.
func (a *Apt) Remove(ctx context.Context, names []string) error {
	for _, n := range names {
		if err := checkName(n); err != nil {
			return err
		}
	}
	have, err := a.Installed(ctx, names)
	if err != nil {
		return err
	}
	var gone []string
	for _, n := range names {
		if _, ok := have[n]; ok {
			gone = append(gone, n)
		}
	}
	if len(gone) == 0 {
		return nil
	}
	sort.Strings(gone)
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, err := a.run(ctx, "apt-get", append([]string{"remove", "-y"}, gone...)...); err != nil {
		return fmt.Errorf("remove %s%s: %w", strings.Join(gone, " "), a.under(), err)
	}
	return nil
}

// RequestUpdate makes the next Candidate or Install run apt-get update
// first, whatever Options.Update says: apply calls it when the mesh's
// repository in the state directory changed, so apt reads the new lists.
func (a *Apt) RequestUpdate() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.forceUpdate = true
}

// updateOnce runs apt-get update if Options.Update asks and it has not
// run yet. The caller holds a.mu.
func (a *Apt) updateOnce(ctx context.Context) error {
	if !a.forceUpdate && (!a.opts.Update || a.updated) {
		return nil
	}
	if _, err := a.run(ctx, "apt-get", "update"); err != nil {
		return fmt.Errorf("update package lists%s: %w", a.under(), err)
	}
	a.updated, a.forceUpdate = true, false
	return nil
}

func (a *Apt) under() string {
	if a.scratch() {
		return " under " + a.root
	}
	return ""
}

// checkName refuses what is not a Debian package name (with an optional
// architecture), so nothing from a declaration reaches apt's command line
// as an option.
func checkName(name string) error {
	bare, arch, hasArch := strings.Cut(name, ":")
	ok := len(bare) >= 2 && isLowerAlnum(bare[0])
	for i := 1; ok && i < len(bare); i++ {
		c := bare[i]
		ok = isLowerAlnum(c) || c == '+' || c == '-' || c == '.'
	}
	if hasArch {
		ok = ok && arch != ""
		for i := 0; ok && i < len(arch); i++ {
			ok = isLowerAlnum(arch[i]) || arch[i] == '-'
		}
	}
	if !ok {
		return fmt.Errorf("package name %q is not a valid Debian package name", name)
	}
	return nil
}

func checkVersion(name, v string) error {
	ok := v[0] >= '0' && v[0] <= '9'
	for i := 0; ok && i < len(v); i++ {
		c := v[i]
		ok = isLowerAlnum(c) || (c >= 'A' && c <= 'Z') || strings.IndexByte(".+-~:", c) >= 0
	}
	if !ok {
		return fmt.Errorf("package %s: version %q is not a valid Debian version", name, v)
	}
	return nil
}

func isLowerAlnum(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') }

// run starts an apt program with the root's settings, no terminal and the
// C locale (its output is parsed), and returns its standard output. A
// failure carries apt's own error lines.
func (a *Apt) run(ctx context.Context, prog string, args ...string) ([]byte, error) {
	full := []string{"-q"}
	env := append(os.Environ(), "LC_ALL=C", "DEBIAN_FRONTEND=noninteractive", "APT_LISTCHANGES_FRONTEND=none")
	if a.scratch() {
		conf, err := a.writeConfig()
		if err != nil {
			return nil, err
		}
		defer os.Remove(conf)
		env = append(env, "APT_CONFIG="+conf)
		full = append(full,
			"-o", "DPkg::Options::=--root="+a.root,
			"-o", "DPkg::Options::=--log="+filepath.Join(a.root, "var/log/dpkg.log"))
	}
	if a.opts.LockWait > 0 {
		full = append(full, "-o", "DPkg::Lock::Timeout="+strconv.Itoa(int((a.opts.LockWait+time.Second-1)/time.Second)))
	}
	for _, c := range a.opts.Config {
		full = append(full, "-o", c)
	}
	full = append(full, args...)

	cmd := exec.CommandContext(ctx, prog, full...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// A killed dpkg leaves half-installed packages: ask it to stop and
	// give it time to finish the package at hand.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	err := cmd.Run()
	if err == nil {
		return stdout.Bytes(), nil
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("%s: %w", prog, ctx.Err())
	}
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) {
		return nil, fmt.Errorf("run %s: %w", prog, err)
	}
	msg := aptMessage(stderr.Bytes(), stdout.Bytes())
	e := fmt.Errorf("%s exited with status %d: %s", prog, exitErr.ExitCode(), msg)
	if strings.Contains(msg, "Could not get lock") {
		return nil, fault.WithHint(fault.New(fault.Temporary, e), "another package manager is running; try again when it is done")
	}
	return nil, e
}

// writeConfig writes the file APT_CONFIG names for a scratch root. apt
// reads it before its configuration directories, so setting Dir here is
// what keeps the machine's /etc/apt out.
func (a *Apt) writeConfig() (string, error) {
	// apt's configuration syntax has no escapes to rely on.
	if strings.ContainsFunc(a.root, func(r rune) bool { return r == '"' || r == '\\' || r < ' ' || r == 0x7f }) {
		return "", fmt.Errorf("root %q: apt cannot be configured for a path with quotes, backslashes or control characters", a.root)
	}
	f, err := os.CreateTemp("", "muster-apt-*.conf")
	if err != nil {
		return "", fmt.Errorf("apt configuration for %s: %w", a.root, err)
	}
	_, err = fmt.Fprintf(f, "Dir \"%s/\";\n", a.root)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("apt configuration for %s: %w", a.root, err)
	}
	return f.Name(), nil
}

// maxMessage bounds the apt output carried in an error: enough for every
// E: line of a failed install, not a whole transcript.
const maxMessage = 1500

// aptMessage picks apt's own words out of a failed run: its error lines
// (E:) if it printed any, else the last lines it printed, joined on one
// line and trimmed to maxMessage.
func aptMessage(stderr, stdout []byte) string {
	var picked []string
	for _, l := range strings.Split(string(stderr), "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "E: ") {
			picked = append(picked, l)
		}
	}
	if len(picked) == 0 {
		for _, src := range [][]byte{stderr, stdout} {
			lines := nonEmptyLines(src)
			if len(lines) > 0 {
				picked = lines[max(0, len(lines)-5):]
				break
			}
		}
	}
	msg := strings.Join(picked, "; ")
	if msg == "" {
		return "no message"
	}
	if len(msg) > maxMessage {
		msg = msg[:maxMessage] + " …"
	}
	return msg
}

func nonEmptyLines(b []byte) []string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// PrepareRoot creates the skeleton apt and dpkg need in a scratch root,
// leaving whatever already exists alone: the dpkg database
// (var/lib/dpkg with empty status and available files, info/ and
// updates/), apt's configuration directories (etc/apt with apt.conf.d,
// sources.list.d, preferences.d, trusted.gpg.d), its lists and cache
// (var/lib/apt/lists/partial, var/cache/apt/archives/partial) and the log
// directory (var/log/apt). Package sources are not written: they come from
// the root's etc/apt or from Options.Config.
func PrepareRoot(root string) error {
	for _, d := range []string{
		"var/lib/dpkg/info",
		"var/lib/dpkg/updates",
		"etc/apt/apt.conf.d",
		"etc/apt/sources.list.d",
		"etc/apt/preferences.d",
		"etc/apt/trusted.gpg.d",
		"var/lib/apt/lists/partial",
		"var/cache/apt/archives/partial",
		"var/log/apt",
	} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return fmt.Errorf("prepare root %s: %w", root, err)
		}
	}
	for _, f := range []string{"var/lib/dpkg/status", "var/lib/dpkg/available"} {
		p := filepath.Join(root, f)
		fh, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("prepare root %s: %w", root, err)
		}
		if err := fh.Close(); err != nil {
			return fmt.Errorf("prepare root %s: %w", root, err)
		}
	}
	return nil
}

// Files lists the paths package name at version ("" for the candidate)
// would install, without installing or downloading anything: apt says
// where the package file is (apt-get install --print-uris), and when that
// is a file on this machine (a file: source, such as the mesh's
// repository, or apt's own download cache) its data member is read with
// dpkg-deb. ok is false when only a download could tell. Package lists
// are updated first as for Candidate.
func (a *Apt) Files(ctx context.Context, name, version string) ([]string, bool, error) {
	if err := checkName(name); err != nil {
		return nil, false, err
	}
	item := name
	if version != "" {
		if err := checkVersion(name, version); err != nil {
			return nil, false, err
		}
		item += "=" + version
	}
	a.mu.Lock()
	err := a.updateOnce(ctx)
	var out []byte
	if err == nil {
		out, err = a.run(ctx, "apt-get", "install", "-qq", "--print-uris", "--no-install-recommends", item)
	}
	a.mu.Unlock()
	if err != nil {
		return nil, false, fmt.Errorf("find package %s%s: %w", item, a.under(), err)
	}
	deb, ok := localDeb(out, name)
	if !ok {
		return nil, false, nil
	}
	paths, err := debPaths(ctx, deb)
	if err != nil {
		return nil, false, fmt.Errorf("package %s%s: %w", item, a.under(), err)
	}
	return paths, true, nil
}

// localDeb finds package name's file among the URIs apt-get --print-uris
// printed ('URI' FILE SIZE HASH per line), if it is on this machine.
func localDeb(out []byte, name string) (string, bool) {
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || !strings.HasPrefix(f[1], name+"_") {
			continue
		}
		uri := strings.Trim(f[0], "'")
		p, ok := strings.CutPrefix(uri, "file:")
		if !ok {
			return "", false
		}
		p = "/" + strings.TrimLeft(p, "/")
		if u, err := url.PathUnescape(p); err == nil {
			p = u
		}
		return filepath.Clean(p), true
	}
	return "", false
}

// debPaths lists the paths a .deb file installs, from its data member as
// dpkg-deb extracts it.
func debPaths(ctx context.Context, deb string) ([]string, error) {
	cmd := exec.CommandContext(ctx, "dpkg-deb", "--fsys-tarfile", deb)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("run dpkg-deb: %w", err)
	}
	var paths []string
	tr := tar.NewReader(out)
	var terr error
	for {
		h, err := tr.Next()
		if err != nil {
			if err != io.EOF {
				terr = err
			}
			break
		}
		p := path.Clean("/" + strings.TrimPrefix(h.Name, "./"))
		if p != "/" {
			paths = append(paths, p)
		}
	}
	io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("dpkg-deb --fsys-tarfile %s: %s", deb, strings.TrimSpace(stderr.String()+" "+err.Error()))
	}
	if terr != nil {
		return nil, fmt.Errorf("read %s: %w", deb, terr)
	}
	return paths, nil
}

// CompareVersions orders two Debian versions as dpkg does (dpkg
// --compare-versions): -1 when a is older than b, 0 when equal, 1 when
// newer.
func (a *Apt) CompareVersions(ctx context.Context, x, y string) (int, error) {
	for _, v := range []string{x, y} {
		if v == "" {
			return 0, errors.New("compare versions: empty version")
		}
		if err := checkVersion("", v); err != nil {
			return 0, err
		}
	}
	for _, c := range []struct {
		op   string
		want int
	}{{"lt", -1}, {"gt", 1}} {
		err := exec.CommandContext(ctx, "dpkg", "--compare-versions", x, c.op, y).Run()
		if err == nil {
			return c.want, nil
		}
		var exitErr *exec.ExitError
		if !errors.As(err, &exitErr) || exitErr.ExitCode() != 1 {
			return 0, fmt.Errorf("dpkg --compare-versions %s %s %s: %w", x, c.op, y, err)
		}
	}
	return 0, nil
}
