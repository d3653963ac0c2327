package debian

import (
	"context"
	"maps"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// baseNames are packages every Debian system has: the benchmark's "20
// installed packages declared present" apply.
var baseNames = []string{
	"apt", "base-files", "base-passwd", "bash", "bsdutils", "coreutils", "dash",
	"debianutils", "diffutils", "dpkg", "findutils", "grep", "gzip", "hostname",
	"login", "mount", "passwd", "sed", "tar", "util-linux",
}

func needDpkg(tb testing.TB) {
	tb.Helper()
	if _, err := os.Stat("/var/lib/dpkg/status"); err != nil {
		tb.Skip("no dpkg database on this system")
	}
	if _, err := exec.LookPath("dpkg-query"); err != nil {
		tb.Skip("dpkg-query not installed")
	}
}

// Reading the status file directly must agree with dpkg itself about every
// package of the running system.
func TestInstalledAgreesWithDpkgQuery(t *testing.T) {
	needDpkg(t)
	out, err := exec.Command("dpkg-query", "-W", "-f", "${Package}\t${Status}\t${Version}\n").Output()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 3 {
			t.Fatalf("dpkg-query line %q", line)
		}
		names = append(names, f[0])
		if strings.HasSuffix(f[1], " ok installed") && f[2] != "" {
			want[f[0]] = f[2]
		}
	}
	got, err := New("/", Options{}).Installed(context.Background(), names)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, want) {
		for n, v := range want {
			if got[n] != v {
				t.Errorf("%s: Installed says %q, dpkg-query %q", n, got[n], v)
			}
		}
		for n, v := range got {
			if _, ok := want[n]; !ok {
				t.Errorf("%s: Installed says %q, dpkg-query not installed", n, v)
			}
		}
	}
}

func BenchmarkInstalled20(b *testing.B) {
	needDpkg(b)
	a := New("/", Options{})
	ctx := context.Background()
	for b.Loop() {
		got, err := a.Installed(ctx, baseNames)
		if err != nil {
			b.Fatal(err)
		}
		if len(got) != len(baseNames) {
			b.Fatalf("found %d of %d base packages", len(got), len(baseNames))
		}
	}
}

// BenchmarkDpkgQuery20 is the yardstick: one dpkg-query call for the same
// names.
func BenchmarkDpkgQuery20(b *testing.B) {
	needDpkg(b)
	args := append([]string{"-W"}, baseNames...)
	for b.Loop() {
		if err := exec.Command("dpkg-query", args...).Run(); err != nil {
			b.Fatal(err)
		}
	}
}
