package debian

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/testutil/aptrepo"
)

const hello = "muster-test-hello"

func helloPkg(version string) aptrepo.Pkg {
	return aptrepo.Pkg{
		Name:    hello,
		Version: version,
		Files:   map[string]string{"/usr/share/" + hello + "/greeting": "hello " + version + "\n"},
	}
}

// scratchRoot returns a prepared scratch root and checks, when the test
// ends, that nothing of the test package reached the machine's own root.
func scratchRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	if err := PrepareRoot(root); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { machineUntouched(t) })
	return root
}

func machineUntouched(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/usr/share/" + hello); err == nil {
		t.Errorf("/usr/share/%s exists on the machine itself", hello)
	}
	for _, f := range []string{"/var/lib/dpkg/status", "/var/log/dpkg.log", "/var/log/apt/history.log"} {
		b, err := os.ReadFile(f)
		if err == nil && strings.Contains(string(b), hello) {
			t.Errorf("%s of the machine mentions %s", f, hello)
		}
	}
	if lists, _ := filepath.Glob("/var/lib/apt/lists/*muster*"); len(lists) > 0 {
		t.Errorf("the machine's apt lists hold %v", lists)
	}
}

func installedVersion(t *testing.T, a *Apt) string {
	t.Helper()
	got, err := a.Installed(context.Background(), []string{hello, "bash"})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := got["bash"]; ok {
		t.Fatalf("scratch root reports the machine's bash %s as installed", v)
	}
	return got[hello]
}

func greeting(t *testing.T, root string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "usr/share", hello, "greeting"))
	if err != nil {
		return ""
	}
	return string(b)
}

// The life of one package in a scratch root, through real apt and dpkg:
// install, upgrade, downgrade to an exact version, a version no repository
// has, the candidate, and removal. Every step is read back from the root's
// own dpkg database and file system.
func TestPackageLifecycle(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	repo := aptrepo.Build(t, t.TempDir(), []aptrepo.Pkg{helloPkg("1.0"), helloPkg("2.0")})
	root := scratchRoot(t)
	a := New(root, Options{Config: repo.Options, Update: true})

	if v := installedVersion(t, a); v != "" {
		t.Fatalf("empty root: %s installed at %s", hello, v)
	}

	steps := []struct {
		name    string
		version string
	}{
		{"install", "1.0"},
		{"upgrade", "2.0"},
		{"downgrade to an exact version", "1.0"},
	}
	for _, s := range steps {
		if err := a.Install(ctx, map[string]string{hello: s.version}); err != nil {
			t.Fatalf("%s %s: %v", s.name, s.version, err)
		}
		if v := installedVersion(t, a); v != s.version {
			t.Fatalf("%s: installed version %q, want %q", s.name, v, s.version)
		}
		if g := greeting(t, root); g != "hello "+s.version+"\n" {
			t.Fatalf("%s: file under the root holds %q", s.name, g)
		}
	}

	err := a.Install(ctx, map[string]string{hello: "9.9"})
	if err == nil {
		t.Fatal("install of version 9.9 that no repository has succeeded")
	}
	t.Log(err)
	if want := "Version '9.9' for '" + hello + "' was not found"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not carry apt's %q", err, want)
	}
	if v := installedVersion(t, a); v != "1.0" {
		t.Errorf("after the failed install: version %q, want 1.0 kept", v)
	}

	if c, err := a.Candidate(ctx, hello); err != nil || c != "2.0" {
		t.Errorf("Candidate = %q, %v; want 2.0", c, err)
	}
	if _, err := a.Candidate(ctx, "muster-test-nowhere"); err == nil || !strings.Contains(err.Error(), "muster-test-nowhere") {
		t.Errorf("Candidate of an unknown package: err = %v, want one naming it", err)
	}

	if err := a.Remove(ctx, []string{hello}); err != nil {
		t.Fatalf("remove: %v", err)
	}
	if v := installedVersion(t, a); v != "" {
		t.Errorf("after remove: installed at %q", v)
	}
	if g := greeting(t, root); g != "" {
		t.Errorf("after remove: file still under the root")
	}
	if err := a.Remove(ctx, []string{hello}); err != nil {
		t.Errorf("removing a package already gone: %v", err)
	}
}

// The failure muster exists for: a package whose download 404s on the
// mirror must fail the install with the mirror's answer, not go green.
func TestInstallMirror404(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	repo := aptrepo.Build(t, t.TempDir(), []aptrepo.Pkg{helloPkg("1.0")})
	srv := httptest.NewServer(http.FileServer(http.Dir(repo.Dir)))
	defer srv.Close()
	// The index is served; the package it names is gone from the mirror.
	if err := os.Remove(repo.DebPath(helloPkg("1.0"))); err != nil {
		t.Fatal(err)
	}
	sources := filepath.Join(t.TempDir(), "sources.list")
	if err := os.WriteFile(sources, []byte("deb [trusted=yes] "+srv.URL+" ./\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	root := scratchRoot(t)
	a := New(root, Options{Update: true, Config: append(repo.Options,
		"Dir::Etc::sourcelist="+sources,
		"Acquire::http::Proxy=DIRECT",
		"Acquire::Retries=0",
	)})

	err := a.Install(ctx, map[string]string{hello: ""})
	if err == nil {
		t.Fatal("install of a package the mirror answers 404 for succeeded")
	}
	t.Log(err)
	for _, want := range []string{"404", "Failed to fetch", hello} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if v := installedVersion(t, a); v != "" {
		t.Errorf("installed at %q after the failed download", v)
	}
}

func TestPrepareRoot(t *testing.T) {
	root := t.TempDir()
	if err := PrepareRoot(root); err != nil {
		t.Fatal(err)
	}
	status := filepath.Join(root, "var/lib/dpkg/status")
	if err := os.WriteFile(status, []byte("Package: kept\nStatus: install ok installed\nVersion: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A second run must not empty a database that is in use.
	if err := PrepareRoot(root); err != nil {
		t.Fatal(err)
	}
	got, err := New(root, Options{}).Installed(context.Background(), []string{"kept"})
	if err != nil || got["kept"] != "1" {
		t.Errorf("after PrepareRoot twice: Installed = %v, %v; want kept=1", got, err)
	}
	for _, d := range []string{"var/lib/dpkg/info", "var/lib/dpkg/updates", "etc/apt/sources.list.d", "var/lib/apt/lists/partial", "var/cache/apt/archives/partial", "var/log/apt"} {
		if fi, err := os.Stat(filepath.Join(root, d)); err != nil || !fi.IsDir() {
			t.Errorf("%s not created: %v", d, err)
		}
	}
}

// A mirror without the repository fails the update, and with it the
// install that asked for fresh lists, instead of installing from stale ones;
// and the version lookup a dry run makes (Candidate) updates the lists
// just as a run would, so it fails the same way.
func TestUpdateFailureFailsInstall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	repo := aptrepo.Build(t, t.TempDir(), []aptrepo.Pkg{helloPkg("1.0")})
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	sources := filepath.Join(t.TempDir(), "sources.list")
	if err := os.WriteFile(sources, []byte("deb [trusted=yes] "+srv.URL+" ./\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	root := scratchRoot(t)
	a := New(root, Options{Update: true, Config: append(repo.Options,
		"Dir::Etc::sourcelist="+sources,
		"Acquire::http::Proxy=DIRECT",
		"Acquire::Retries=0",
	)})
	err := a.Install(ctx, map[string]string{hello: "1.0"})
	t.Log(err)
	if err == nil || !strings.Contains(err.Error(), "404") || !strings.Contains(err.Error(), "update package lists") {
		t.Fatalf("install with an unreachable repository: err = %v, want the update's 404", err)
	}
	// A fresh Apt, as each apply makes one.
	dry := New(root, a.opts)
	if v, err := dry.Candidate(ctx, hello); err == nil || !strings.Contains(err.Error(), "update package lists") {
		t.Fatalf("a dry run's lookup with an unreachable repository: %q, %v, want the update's 404", v, err)
	}
}

// A timer-driven apply that meets another package manager at work must
// fail as temporary (try again later), not as a broken package.
func TestLockHeldIsTemporary(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	repo := aptrepo.Build(t, t.TempDir(), []aptrepo.Pkg{helloPkg("1.0")})
	root := scratchRoot(t)
	lock, err := os.OpenFile(filepath.Join(root, "var/lib/dpkg/lock-frontend"), os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	// apt takes the same whole-file write lock; a child process sees this
	// one as held by another package manager.
	if err := syscall.FcntlFlock(lock.Fd(), syscall.F_SETLK, &syscall.Flock_t{Type: syscall.F_WRLCK, Whence: 0}); err != nil {
		t.Fatal(err)
	}
	a := New(root, Options{Config: repo.Options, Update: true})
	err = a.Install(ctx, map[string]string{hello: "1.0"})
	t.Log(err)
	if err == nil {
		t.Fatal("install succeeded while the dpkg lock was held")
	}
	if fault.ClassOf(err) != fault.Temporary {
		t.Errorf("error class %v, want temporary: %v", fault.ClassOf(err), err)
	}
	if !strings.Contains(err.Error(), "Could not get lock") {
		t.Errorf("error %q lacks apt's message", err)
	}
}

// Files reads what a package from a file: source would install, without
// installing or downloading it, as a dry run needs to know a unit's
// package.
func TestFilesWithoutInstalling(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	unit := aptrepo.Pkg{Name: hello, Version: "1.0", Files: map[string]string{"/lib/systemd/system/" + hello + ".service": "[Service]\nExecStart=/bin/true\n"}}
	repo := aptrepo.Build(t, t.TempDir(), []aptrepo.Pkg{unit, helloPkg("2.0")})
	root := scratchRoot(t)
	a := New(root, Options{Config: repo.Options, Update: true})
	for _, tc := range []struct {
		version, want string
	}{
		{"1.0", "/lib/systemd/system/" + hello + ".service"},
		{"", "/usr/share/" + hello + "/greeting"}, // the candidate, 2.0
	} {
		paths, ok, err := a.Files(ctx, hello, tc.version)
		if err != nil || !ok {
			t.Fatalf("Files(%q) = %v, %v, %v", tc.version, paths, ok, err)
		}
		if !slices.Contains(paths, tc.want) {
			t.Errorf("Files(%q) = %q, want it to hold %s", tc.version, paths, tc.want)
		}
	}
	if v := installedVersion(t, a); v != "" {
		t.Errorf("Files installed version %s", v)
	}
	if _, err := os.Stat(filepath.Join(root, "lib/systemd/system", hello+".service")); err == nil {
		t.Error("Files put the unit under the root")
	}
	if _, _, err := a.Files(ctx, hello, "9.9"); err == nil {
		t.Error("Files of a version no repository has: no error")
	}
}

// Versions are ordered by dpkg's rules, epochs and tildes included.
func TestCompareVersions(t *testing.T) {
	a := New(t.TempDir(), Options{})
	for _, tc := range []struct {
		x, y string
		want int
	}{
		{"1.0", "1.0.1", -1},
		{"1.0~rc1", "1.0", -1},
		{"1:0.1", "2.0", 1},
		{"1.0-1", "1.0-1", 0},
		{"1.10", "1.9", 1},
	} {
		got, err := a.CompareVersions(context.Background(), tc.x, tc.y)
		if err != nil || got != tc.want {
			t.Errorf("CompareVersions(%s, %s) = %d, %v; want %d", tc.x, tc.y, got, err, tc.want)
		}
	}
}
