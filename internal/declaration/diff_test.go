package declaration

import (
	"slices"
	"strings"
	"testing"

	"github.com/muster-tool/muster/internal/resource"
)

func TestDiff(t *testing.T) {
	yes := true
	old := []resource.Spec{
		{Kind: resource.File, Path: "/etc/motd", State: "present", Content: "old\n"},
		{Kind: resource.Package, Name: "nginx", Version: "latest"},
		{Kind: resource.Package, Name: "telnet", Version: "present"},
		{Kind: resource.Service, Name: "nginx.service", Enabled: &yes},
	}
	enabled := true
	new := []resource.Spec{
		{Kind: resource.Service, Name: "nginx.service", Enabled: &enabled}, // same value, other pointer
		{Kind: resource.File, Path: "/etc/motd", State: "present", Content: "new\n"},
		{Kind: resource.Package, Name: "nginx", Version: "latest"},
		{Kind: resource.Directory, Path: "/srv/www", State: "present"},
		{Kind: resource.Package, Name: "curl", Version: "present"},
	}
	added, changed, removed := Diff(old, new)
	if want := []string{"directory:/srv/www", "package:curl"}; !slices.Equal(added, want) {
		t.Errorf("added = %v, want %v", added, want)
	}
	if want := []string{"file:/etc/motd"}; !slices.Equal(changed, want) {
		t.Errorf("changed = %v, want %v", changed, want)
	}
	if want := []string{"package:telnet"}; !slices.Equal(removed, want) {
		t.Errorf("removed = %v, want %v", removed, want)
	}
	if a, c, r := Diff(old, old); len(a)+len(c)+len(r) != 0 {
		t.Errorf("a state differs from itself: %v %v %v", a, c, r)
	}
}

func TestChanges(t *testing.T) {
	on, off := true, false
	cases := []struct {
		name     string
		old, new resource.Spec
		want     []string
	}{
		{"mode and owner",
			resource.Spec{Kind: resource.File, Path: "/a", State: "present", Mode: "0644"},
			resource.Spec{Kind: resource.File, Path: "/a", State: "present", Mode: "0600", Owner: "root"},
			[]string{"mode: 0644 -> 0600", "owner: (none) -> root"}},
		{"content as digests",
			resource.Spec{Kind: resource.File, Path: "/a", State: "present", Content: "one"},
			resource.Spec{Kind: resource.File, Path: "/a", State: "present", Content: "two"},
			[]string{"content: " + Digest("one") + " -> " + Digest("two")}},
		{"made secret",
			resource.Spec{Kind: resource.File, Path: "/a", State: "present", Content: "x"},
			resource.Spec{Kind: resource.File, Path: "/a", State: "present", Content: "x", Secret: true},
			[]string{"secret: false -> true"}},
		{"set-id bits allowed",
			resource.Spec{Kind: resource.File, Path: "/a", State: "present", Mode: "0755"},
			resource.Spec{Kind: resource.File, Path: "/a", State: "present", Mode: "4755", SpecialBits: true, ReplaceSymlink: true},
			[]string{"mode: 0755 -> 4755", "special_bits: false -> true", "replace_symlink: false -> true"}},
		{"removed file",
			resource.Spec{Kind: resource.File, Path: "/a", State: "present", Content: "x"},
			resource.Spec{Kind: resource.File, Path: "/a", State: "absent"},
			[]string{"state: present -> absent", "content: " + Digest("x") + " -> (none)"}},
		{"service",
			resource.Spec{Kind: resource.Service, Name: "a.service", Running: &on},
			resource.Spec{Kind: resource.Service, Name: "a.service", Running: &off, RestartOn: []string{"/etc/a", "/etc/b"}},
			[]string{"running: true -> false", "restart_on: (none) -> /etc/a,/etc/b"}},
		{"version",
			resource.Spec{Kind: resource.Package, Name: "nginx", Version: "latest"},
			resource.Spec{Kind: resource.Package, Name: "nginx", Version: "1.22.1-9", Order: 5},
			[]string{"version: latest -> 1.22.1-9", "order: (none) -> 5"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Changes(c.old, c.new); !slices.Equal(got, c.want) {
				t.Errorf("Changes = %q, want %q", got, c.want)
			}
		})
	}
}

// Dry-run output lands in CI logs: secret content must never be in it,
// only its digest.
func TestDiffOutputNeverShowsContent(t *testing.T) {
	const secret = "hunter2-correct-horse"
	old := resource.Spec{Kind: resource.File, Path: "/etc/token", State: "present", Content: secret + "-old", Secret: true, Mode: "0600"}
	new := old
	new.Content = secret + "-new"
	out := strings.Join(append(Changes(old, new), Summary(old), Summary(new)), "\n")
	if strings.Contains(out, "hunter2") {
		t.Fatalf("content shown:\n%s", out)
	}
	if !strings.Contains(out, Digest(secret+"-new")) {
		t.Errorf("the new content's digest is missing:\n%s", out)
	}
}

func TestSummary(t *testing.T) {
	s := resource.Spec{Kind: resource.File, Path: "/etc/motd", State: "present", Content: "hi\n", Mode: "0644"}
	want := "file:/etc/motd state=present content=" + Digest("hi\n") + " mode=0644"
	if got := Summary(s); got != want {
		t.Errorf("Summary = %q, want %q", got, want)
	}
	if d := Digest("hi\n"); !strings.HasPrefix(d, "sha256:") || len(d) != len("sha256:")+12 {
		t.Errorf("Digest = %q, want sha256: and 12 hex digits", d)
	}
}
