package aptrepo

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The repository must hold every version built, indexed, with root-owned
// files at the declared paths: a package test relies on all three.
func TestBuild(t *testing.T) {
	v1 := Pkg{Name: "muster-test-repo", Version: "1.0", Files: map[string]string{"/usr/share/muster-test-repo/a": "one\n"}}
	v2 := Pkg{Name: "muster-test-repo", Version: "1:2.0-1", Files: map[string]string{"/usr/share/muster-test-repo/a": "two\n"}}
	repo := Build(t, t.TempDir(), []Pkg{v1, v2})

	index, err := os.ReadFile(repo.Dir + "/Packages")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Version: 1.0\n", "Version: 1:2.0-1\n", "Filename: ./muster-test-repo_2.0-1_all.deb\n"} {
		if !strings.Contains(string(index), want) {
			t.Errorf("Packages lacks %q:\n%s", want, index)
		}
	}
	if want := "deb [trusted=yes] file:" + repo.Dir + " ./"; repo.SourcesLine != want {
		t.Errorf("SourcesLine = %q, want %q", repo.SourcesLine, want)
	}

	list, err := exec.Command("dpkg-deb", "--contents", repo.DebPath(v2)).Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(list), "-rw-r--r-- root/root") || !strings.Contains(string(list), "./usr/share/muster-test-repo/a") {
		t.Errorf("package contents are not root-owned at the declared path:\n%s", list)
	}
	content, err := exec.Command("dpkg-deb", "--fsys-tarfile", repo.DebPath(v2)).Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(content), "two\n") {
		t.Error("package 2.0 does not carry its file content")
	}
}
