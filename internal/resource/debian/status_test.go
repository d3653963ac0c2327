package debian

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const statusFile = `Package: bash
Essential: yes
Status: install ok installed
Priority: required
Architecture: amd64
Version: 5.2.15-2+b2
Description: GNU Bourne Again SHell
 Package: not-a-field
 Status: install ok installed

Package: held
Status: hold ok installed
Architecture: all
Version: 1.2

Package: leaving
Status: deinstall ok installed
Architecture: all
Version: 3

Package: confonly
Status: deinstall ok config-files
Architecture: all
Version: 4

Package: halfway
Status: install ok half-installed
Architecture: all
Version: 5

Package: broken
Status: install reinstreq installed
Architecture: all
Version: 6

Package: libc6
Status: install ok installed
Architecture: amd64
Multi-Arch: same
Version: 2.36-9

Package: libc6
Status: install ok installed
Architecture: i386
Multi-Arch: same
Version: 2.36-9

Package: noversion
Status: install ok installed
Architecture: all
`

func writeAdmindir(t *testing.T, status string, journal map[string]string) string {
	t.Helper()
	root := t.TempDir()
	if err := PrepareRoot(root); err != nil {
		t.Fatal(err)
	}
	admin := filepath.Join(root, "var/lib/dpkg")
	if err := os.WriteFile(filepath.Join(admin, "status"), []byte(status), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, body := range journal {
		if err := os.WriteFile(filepath.Join(admin, "updates", name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestInstalled(t *testing.T) {
	root := writeAdmindir(t, statusFile, nil)
	tests := []struct {
		name  string
		names []string
		want  map[string]string
	}{
		{"installed", []string{"bash"}, map[string]string{"bash": "5.2.15-2+b2"}},
		{"missing", []string{"nginx"}, map[string]string{}},
		{"held counts", []string{"held"}, map[string]string{"held": "1.2"}},
		{"selected for removal still installed", []string{"leaving"}, map[string]string{"leaving": "3"}},
		{"config files only", []string{"confonly"}, map[string]string{}},
		{"half installed", []string{"halfway"}, map[string]string{}},
		{"reinstall required", []string{"broken"}, map[string]string{}},
		{"continuation lines are not fields", []string{"not-a-field"}, map[string]string{}},
		{"no version", []string{"noversion"}, map[string]string{}},
		{"architecture qualified", []string{"libc6:i386", "libc6:arm64"}, map[string]string{"libc6:i386": "2.36-9"}},
		{"bare multi-arch", []string{"libc6"}, map[string]string{"libc6": "2.36-9"}},
		{"several", []string{"bash", "nginx", "held", "halfway"}, map[string]string{"bash": "5.2.15-2+b2", "held": "1.2"}},
		{"none asked", nil, map[string]string{}},
	}
	a := New(root, Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := a.Installed(context.Background(), tt.names)
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got, tt.want) {
				t.Errorf("Installed(%q) = %v, want %v", tt.names, got, tt.want)
			}
		})
	}
}

// dpkg interrupted before it folds its journal back into the status file
// leaves the truth in updates/: a read-back that ignored it would report
// the state before the interrupted run.
func TestInstalledReadsJournal(t *testing.T) {
	root := writeAdmindir(t, statusFile, map[string]string{
		"0000":  "Package: bash\nStatus: install ok half-configured\nArchitecture: amd64\nVersion: 5.2.21-1\n",
		"0001":  "Package: bash\nStatus: install ok installed\nArchitecture: amd64\nVersion: 5.2.21-1\n",
		"0002":  "Package: held\nStatus: deinstall ok config-files\nArchitecture: all\nVersion: 1.2\n",
		"tmp.i": "Package: nginx\nStatus: install ok installed\nVersion: 1\n",
	})
	got, err := New(root, Options{}).Installed(context.Background(), []string{"bash", "held", "nginx"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"bash": "5.2.21-1"}
	if !maps.Equal(got, want) {
		t.Errorf("Installed = %v, want %v", got, want)
	}
}

func TestInstalledNoDatabase(t *testing.T) {
	root := t.TempDir()
	_, err := New(root, Options{}).Installed(context.Background(), []string{"bash"})
	if err == nil || !strings.Contains(err.Error(), root) {
		t.Fatalf("Installed on a root without a dpkg database: err = %v, want an error naming the root", err)
	}
}

func TestParseCandidate(t *testing.T) {
	tests := []struct {
		name, out, pkg, want string
	}{
		{"candidate", "hello:\n  Installed: (none)\n  Candidate: 2.0\n  Version table:\n     2.0 500\n", "hello", "2.0"},
		{"none", "hello:\n  Installed: (none)\n  Candidate: (none)\n", "hello", ""},
		{"unknown package prints nothing", "", "hello", ""},
		{"other package section", "other:\n  Candidate: 1\n", "hello", ""},
		{"architecture qualified", "libc6:i386:\n  Installed: (none)\n  Candidate: 2.36-9\n", "libc6:i386", "2.36-9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := parseCandidate([]byte(tt.out), tt.pkg); got != tt.want {
				t.Errorf("parseCandidate = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestAptMessage(t *testing.T) {
	tests := []struct {
		name, stderr, stdout, want string
	}{
		{"error lines", "W: something\nE: Version '9.9' for 'x' was not found\nE: second\n", "Reading package lists...\n", "E: Version '9.9' for 'x' was not found; E: second"},
		{"no error lines", "", "a\nb\nc\nd\ne\nf\ng\n", "c; d; e; f; g"},
		{"nothing", "", "", "no message"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := aptMessage([]byte(tt.stderr), []byte(tt.stdout)); got != tt.want {
				t.Errorf("aptMessage = %q, want %q", got, tt.want)
			}
		})
	}
	long := aptMessage([]byte("E: "+strings.Repeat("x", 5000)), nil)
	if len(long) > maxMessage+10 {
		t.Errorf("message of %d bytes not trimmed", len(long))
	}
}

// A name from a declaration must never reach apt as an option.
func TestRefusesBadNames(t *testing.T) {
	a := New(t.TempDir(), Options{})
	ctx := context.Background()
	for _, name := range []string{"-o", "--reinstall", "Nginx", "a", "x y", "pkg:", ""} {
		if err := a.Install(ctx, map[string]string{name: ""}); err == nil || !strings.Contains(err.Error(), "not a valid Debian package name") {
			t.Errorf("Install(%q): err = %v, want a refusal of the name", name, err)
		}
		if _, err := a.Candidate(ctx, name); err == nil {
			t.Errorf("Candidate(%q) accepted the name", name)
		}
	}
	for _, v := range []string{"-1", "1 2", "1;2", "latest"} {
		if err := a.Install(ctx, map[string]string{"hello": v}); err == nil || !strings.Contains(err.Error(), "not a valid Debian version") {
			t.Errorf("Install(hello=%q): err = %v, want a refusal of the version", v, err)
		}
	}
}
