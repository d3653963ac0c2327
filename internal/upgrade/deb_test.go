package upgrade

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var debScript = filepath.Join(moduleRoot, "scripts", "deb.sh")

// The Debian version decides what apt takes for newer: a release must
// sort after its pre-releases and before the commits that follow it.
func TestDebVersion(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{"v1.2.0", "1.2.0"},
		{"1.2.0", "1.2.0"},
		{"v1.2.0-rc1", "1.2.0~rc1"},
		{"v1.2.0-3-gabc1234", "1.2.0+git3.gabc1234"},
		{"v1.2.0-rc1-3-gabc1234-dirty", "1.2.0~rc1+git3.gabc1234.dirty"},
		{"v1.2.0-dirty", "1.2.0+dirty"},
		{"abc1234", "0.0~git.gabc1234"},
		{"1a2b3c4d-dirty", "0.0~git.g1a2b3c4d.dirty"},
		{"devel", "0.0~devel"},
	}
	for _, c := range cases {
		out, err := exec.Command(debScript, "--print-version", c.in).Output()
		if err != nil {
			t.Fatalf("deb.sh --print-version %s: %v", c.in, err)
		}
		if got := strings.TrimSpace(string(out)); got != c.want {
			t.Errorf("deb.sh --print-version %s = %s, want %s", c.in, got, c.want)
		}
	}
	// Each pair in the order apt must see it.
	order := []string{"0.0~git.gabc1234", "1.2.0~rc1", "1.2.0~rc1+git3.gabc1234", "1.2.0", "1.2.0+dirty", "1.2.0+git3.gabc1234", "1.2.1~rc1"}
	for i := 1; i < len(order); i++ {
		if err := exec.Command("dpkg", "--compare-versions", order[i-1], "lt", order[i]).Run(); err != nil {
			t.Errorf("dpkg does not sort %s before %s", order[i-1], order[i])
		}
	}
	if err := exec.Command(debScript, "--print-version", "v1 2").Run(); err == nil {
		t.Error("a version with a space was accepted")
	}
}

// make deb: a package dpkg accepts, holding the stamped binary, the
// launcher, the units, every man page and the config directory, all
// root-owned with the modes they need.
func TestMakeDeb(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		t.Fatal("dpkg-deb not found: install dpkg")
	}
	out := t.TempDir()
	cmd := exec.Command(debScript, "v1.0-rc1-2-gdeadbee", out)
	// The test suite's own build settings, so the Go build cache serves
	// this build too; released packages are static (CGO_ENABLED=0).
	cmd.Env = append(os.Environ(), "CGO_ENABLED="+goEnv(t, "CGO_ENABLED"), "DEB_COMPRESS=gzip")
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("deb.sh: %v\n%s", err, b)
	}
	arch := goEnv(t, "GOARCH")
	if arch == "386" {
		arch = "i386"
	}
	deb := filepath.Join(out, "muster_1.0~rc1+git2.gdeadbee_"+arch+".deb")
	if got := strings.TrimSpace(string(b)); got != deb {
		t.Fatalf("deb.sh printed %q, want %q", got, deb)
	}

	info := run(t, "dpkg-deb", "--info", deb)
	for _, want := range []string{"Package: muster\n", "Version: 1.0~rc1+git2.gdeadbee\n", "Architecture: " + arch + "\n", "Section: admin\n", "Maintainer: "} {
		if !strings.Contains(info, want) {
			t.Errorf("dpkg-deb --info lacks %q:\n%s", want, info)
		}
	}
	if strings.Contains(info, "postinst") || strings.Contains(info, "preinst") {
		t.Errorf("the package has maintainer scripts:\n%s", info)
	}

	contents := run(t, "dpkg-deb", "--contents", deb)
	want := map[string]string{
		"./":                             "drwxr-xr-x root/root",
		"./usr/bin/muster":               "-rwxr-xr-x root/root",
		"./usr/lib/muster/muster-launch": "-rwxr-xr-x root/root",
		"./lib/systemd/system/muster-apply.service": "-rw-r--r-- root/root",
		"./lib/systemd/system/muster-apply.timer":   "-rw-r--r-- root/root",
		"./etc/muster/":                    "drwxr-xr-x root/root",
		"./usr/share/doc/muster/copyright": "-rw-r--r-- root/root",
	}
	pages, _ := filepath.Glob(filepath.Join(moduleRoot, "man", "*.[1-9]"))
	if len(pages) == 0 {
		t.Fatal("no man pages found")
	}
	for _, p := range pages {
		s := p[len(p)-1:]
		want["./usr/share/man/man"+s+"/"+filepath.Base(p)+".gz"] = "-rw-r--r-- root/root"
	}
	have := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(contents), "\n") {
		f := strings.Fields(l)
		if len(f) >= 6 {
			have[f[len(f)-1]] = f[0] + " " + f[1]
		}
	}
	for path, mode := range want {
		if have[path] != mode {
			t.Errorf("%s: %q in the package, want %q", path, have[path], mode)
		}
	}

	// The binary is stamped with the package's version, so dpkg and
	// muster version agree.
	x := t.TempDir()
	run(t, "dpkg-deb", "-x", deb, x)
	if v := run(t, filepath.Join(x, "usr/bin/muster"), "version"); !strings.HasPrefix(v, "muster 1.0~rc1+git2.gdeadbee ") {
		t.Errorf("muster version in the package says %q", v)
	}
	if !fileEqual(t, filepath.Join(x, "usr/lib/muster/muster-launch"), launcher) {
		t.Error("the packaged launcher is not dist/muster-launch")
	}
	if page := run(t, "sh", "-c", "gzip -dc "+filepath.Join(x, "usr/share/man/man1/muster.1.gz")); page != strings.TrimSpace(mustRead(t, filepath.Join(moduleRoot, "man", "muster.1"))) {
		t.Error("muster.1.gz does not hold man/muster.1")
	}
}

func goEnv(t *testing.T, key string) string {
	t.Helper()
	return run(t, "go", "env", key)
}

func run(t *testing.T, prog string, args ...string) string {
	t.Helper()
	out, err := exec.Command(prog, args...).Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("%s %s: %v\n%s", prog, strings.Join(args, " "), err, msg)
	}
	return strings.TrimSpace(string(out))
}
