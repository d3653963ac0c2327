package declaration

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

const fleetToml = `[role.all]
nodes = ["*"]
[role.all.package.curl]

[role.web]
nodes = ["web-*", "www?"]
[role.web.package.nginx]
version = "latest"

[role.prod]
labels = { env = "prod" }
[role.prod.file."/etc/motd"]
content = "production\n"

[role.prodweb]
nodes = ["web-*"]
labels = { env = "prod", tier = "front" }
[role.prodweb.file."/etc/nginx/tls.conf"]
content = "tls on\n"
`

func ids(r Resolved) []string {
	var out []string
	for _, s := range r.Resources {
		out = append(out, s.ID())
	}
	return out
}

func TestResolveSelectsByPatternAndLabels(t *testing.T) {
	d := mustParse(t, map[string]string{"site.toml": fleetToml})
	nodes := []Node{
		{Name: "web-01", Labels: map[string]string{"env": "prod", "tier": "front"}},
		{Name: "web-02", Labels: map[string]string{"env": "prod"}},
		{Name: "www1"},
		{Name: "www12"},
		{Name: "db-01", Labels: map[string]string{"env": "prod", "tier": "front"}},
	}
	resolved, unmatched, problems := d.Resolve(nodes)
	if len(problems) != 0 || len(unmatched) != 0 {
		t.Fatalf("problems:\n%s\nunmatched: %v", problemLines(problems), unmatched)
	}
	want := map[string][]string{
		// every label of prodweb, and a matching name
		"web-01": {"file:/etc/motd", "file:/etc/nginx/tls.conf", "package:curl", "package:nginx"},
		// lacks tier = "front"
		"web-02": {"file:/etc/motd", "package:curl", "package:nginx"},
		// "www?" is one character
		"www1":  {"package:curl", "package:nginx"},
		"www12": {"package:curl"},
		// labels match prodweb but the name does not
		"db-01": {"file:/etc/motd", "package:curl"},
	}
	if len(resolved) != len(nodes) {
		t.Fatalf("resolved %d nodes, want %d", len(resolved), len(nodes))
	}
	for i, r := range resolved {
		if r.Node != nodes[i].Name {
			t.Errorf("resolved[%d] is %s, want %s (the order given)", i, r.Node, nodes[i].Name)
		}
		if got := ids(r); !slices.Equal(got, want[r.Node]) {
			t.Errorf("%s: got %v, want %v", r.Node, got, want[r.Node])
		}
	}
}

func TestResolveNodeSectionOverridesAndAdds(t *testing.T) {
	d := mustParse(t, map[string]string{
		"site.toml": fleetToml,
		"nodes.toml": `[node.web-02.package.nginx]
version = "1.22.1-9"
[node.web-02.file."/etc/canary"]
content = "yes\n"
`,
	})
	resolved, _, problems := d.Resolve([]Node{{Name: "web-01"}, {Name: "web-02"}})
	if HasErrors(problems) {
		t.Fatalf("problems:\n%s", problemLines(problems))
	}
	version := func(r Resolved) string {
		for _, s := range r.Resources {
			if s.ID() == "package:nginx" {
				return s.Version
			}
		}
		return ""
	}
	if v := version(resolved[0]); v != "latest" {
		t.Errorf("web-01 nginx = %q, want the role's \"latest\"", v)
	}
	if v := version(resolved[1]); v != "1.22.1-9" {
		t.Errorf("web-02 nginx = %q, want the node section's version", v)
	}
	want := []string{"file:/etc/canary", "package:curl", "package:nginx"}
	if got := ids(resolved[1]); !slices.Equal(got, want) {
		t.Errorf("web-02 = %v, want %v (one nginx, sorted)", got, want)
	}
}

// ResolveEach reuses one buffer for the nodes with a node section, so
// what each yield sees must be what Resolve keeps, and Own must say which
// nodes those are.
func TestResolveEachYieldsWhatResolveKeeps(t *testing.T) {
	// Without a role for every node, so that db-01 is unmatched.
	d := mustParse(t, map[string]string{
		"site.toml": strings.Replace(fleetToml, `nodes = ["*"]`, `nodes = ["web-*"]`, 1),
		"nodes.toml": `[node.web-01.file."/etc/hostname"]
content = "web-01\n"
[node.web-02.package.nginx]
version = "1.22.1-9"
[node.web-04.file."/etc/hostname"]
content = "web-04\n"
`,
	})
	nodes := []Node{{Name: "web-01"}, {Name: "web-02"}, {Name: "db-01"}, {Name: "web-03"}, {Name: "web-04"}, {Name: "web-01"}}
	want, wantUnmatched, wantProblems := d.Resolve(nodes)
	var got []Resolved
	unmatched, problems := d.ResolveEach(nodes, func(r Resolved) {
		// Copied now: an Own node's resources are reused after yield.
		r.Resources = slices.Clone(r.Resources)
		got = append(got, r)
	})
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ResolveEach yields\n%+v\nResolve keeps\n%+v", got, want)
	}
	if !slices.Equal(unmatched, wantUnmatched) || !reflect.DeepEqual(problems, wantProblems) {
		t.Errorf("ResolveEach: unmatched %v, problems %v; Resolve: %v, %v", unmatched, problems, wantUnmatched, wantProblems)
	}
	var own []string
	for _, r := range want {
		if r.Own {
			own = append(own, r.Node)
		}
	}
	if !slices.Equal(own, []string{"web-01", "web-02", "web-04"}) {
		t.Errorf("own = %v, want the nodes with a node section", own)
	}
	if !slices.Equal(wantUnmatched, []string{"db-01"}) {
		t.Errorf("unmatched = %v, want [db-01]", wantUnmatched)
	}
	if h := want[0].Resources[0]; h.Content != "web-01\n" {
		t.Errorf("web-01's first resource = %+v, want its host name file", h)
	}
}

func TestResolveUnmatchedAndWarnings(t *testing.T) {
	d := mustParse(t, map[string]string{
		"site.toml": `[role.web]
nodes = ["web-*"]
[role.web.package.nginx]

[role.db]
labels = { tier = "db" }
[role.db.package.postgresql]

[node.mail-01.package.postfix]

[node.web-99.package.htop]
`,
	})
	resolved, unmatched, problems := d.Resolve([]Node{
		{Name: "web-01"}, {Name: "lonely"}, {Name: "mail-01"}, {Name: "web-01"},
	})
	if !slices.Equal(unmatched, []string{"lonely"}) {
		t.Errorf("unmatched = %v, want [lonely]", unmatched)
	}
	if len(resolved) != 3 || resolved[1].Node != "lonely" || len(resolved[1].Resources) != 0 {
		t.Errorf("want web-01, lonely (no resources), mail-01 once each; got %v", resolved)
	}
	if got := ids(resolved[2]); !slices.Equal(got, []string{"package:postfix"}) {
		t.Errorf("mail-01, named only by its node section, got %v", got)
	}
	want := []string{
		"(warning) site.toml:5: role.db: role db selects none of the 3 nodes",
		"(warning) site.toml:11: node.web-99: no node named web-99 is enrolled; this section applies to nothing",
	}
	if got := strings.Split(strings.TrimSpace(problemLines(problems)), "\n"); !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestResolveConflictBetweenRoles(t *testing.T) {
	files := map[string]string{
		"a.toml": `[role.base]
nodes = ["*"]
[role.base.file."/etc/motd"]
content = "hello\n"
mode = "0644"
`,
		"b.toml": `[role.web]
nodes = ["web-*"]

[role.web.file."/etc/motd"]
content = "hello\n"
mode = "0600"

[role.web.package.nginx]
`,
	}
	d := mustParse(t, files)
	_, _, problems := d.Resolve([]Node{{Name: "db-01"}, {Name: "web-01"}, {Name: "web-02"}, {Name: "web-03"}})
	want := `b.toml:4: role.web.file."/etc/motd": node web-01 and 2 more: file:/etc/motd is declared differently by role web here and by role base at a.toml:3`
	if len(problems) != 1 || problems[0].String() != want || problems[0].Warning {
		t.Fatalf("problems:\n%s\nwant:\n%s", problemLines(problems), want)
	}

	t.Run("settled by a node section", func(t *testing.T) {
		files["c.toml"] = "[node.web-01.file.\"/etc/motd\"]\ncontent = \"mine\\n\"\n"
		d := mustParse(t, files)
		_, _, problems := d.Resolve([]Node{{Name: "web-01"}})
		if len(problems) != 0 {
			t.Fatalf("problems:\n%s", problemLines(problems))
		}
	})
	t.Run("identical declarations agree", func(t *testing.T) {
		files["b.toml"] = strings.Replace(files["b.toml"], `"0600"`, `"644"`, 1)
		d := mustParse(t, files)
		_, _, problems := d.Resolve([]Node{{Name: "web-01"}})
		if len(problems) != 0 {
			t.Fatalf("problems:\n%s", problemLines(problems))
		}
	})
}

// One path declared as two types is refused at declare time wherever the
// two come from, naming both places, for the nodes that would get both.
func TestResolvePathDeclaredAsTwoTypes(t *testing.T) {
	base := `[role.base]
nodes = ["*"]
[role.base.file."/etc/app"]
content = "x\n"
`
	tests := []struct {
		name  string
		other string
		nodes []Node
		want  []string
	}{
		{"two roles", `[role.web]
nodes = ["web-*"]
[role.web.directory."/etc/app"]
`, []Node{{Name: "db-01"}, {Name: "web-01"}, {Name: "web-02"}},
			[]string{`b.toml:3: role.web.directory."/etc/app": node web-01 and 1 more: /etc/app is declared as a directory by role web here and as a file by role base at a.toml:3; a path has one type`}},
		{"a role and a node section", `[node.web-01.symlink."/etc/app"]
target = "/opt/app"
`, []Node{{Name: "db-01"}, {Name: "web-01"}},
			[]string{`b.toml:1: node.web-01.symlink."/etc/app": node web-01: /etc/app is declared as a symlink by node web-01 here and as a file by role base at a.toml:3; a path has one type`}},
		{"a node section that also overrides", `[node.web-01.symlink."/etc/app"]
target = "/opt/app"
[node.web-01.file."/etc/other"]
content = ""
`, []Node{{Name: "web-01"}},
			[]string{`b.toml:1: node.web-01.symlink."/etc/app": node web-01: /etc/app is declared as a symlink by node web-01 here and as a file by role base at a.toml:3; a path has one type`}},
		{"roles that no node shares", `[role.web]
nodes = ["web-*"]
[role.web.directory."/etc/app"]
[role.base2]
nodes = ["db-*"]
[role.base2.file."/etc/app"]
content = "x\n"
`, []Node{{Name: "db-01"}}, nil},
		{"a node section replacing the resource", `[node.web-01.file."/etc/app"]
content = "mine\n"
`, []Node{{Name: "web-01"}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{"a.toml": base, "b.toml": tc.other}
			if tc.name == "roles that no node shares" {
				files["a.toml"] = ""
			}
			d := mustParse(t, files)
			_, _, problems := d.Resolve(tc.nodes)
			var got []string
			for _, p := range problems {
				if !p.Warning {
					got = append(got, p.String())
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// Settings new to a resource take part in "declared differently".
func TestResolveSpecialBitsDiffer(t *testing.T) {
	d := mustParse(t, map[string]string{"site.toml": `[role.a]
nodes = ["*"]
[role.a.file."/usr/local/bin/tool"]
content = ""
mode = "4755"
special_bits = true
[role.b]
nodes = ["*"]
[role.b.file."/usr/local/bin/tool"]
content = ""
mode = "4755"
special_bits = true
replace_symlink = true
`})
	_, _, problems := d.Resolve([]Node{{Name: "n1"}})
	if len(problems) != 1 || !strings.Contains(problems[0].Message, "declared differently") {
		t.Errorf("problems:\n%s", problemLines(problems))
	}
}

// Resolution must scale to large fleets: nodes share specs and content
// rather than each getting a copy.
func TestResolveSharesContent(t *testing.T) {
	d := mustParse(t, map[string]string{
		"site.toml": "[role.a]\nnodes = [\"*\"]\n[role.a.file.\"/etc/big\"]\nsource = \"big\"\n" +
			"[node.n2.package.htop]\n",
		"big": strings.Repeat("data ", 10000),
	})
	resolved, _, _ := d.Resolve([]Node{{Name: "n1"}, {Name: "n2"}, {Name: "n3"}})
	first := unsafe.StringData(resolved[0].Resources[0].Content)
	for _, r := range resolved {
		for _, s := range r.Resources {
			if s.Kind == "file" && unsafe.StringData(s.Content) != first {
				t.Errorf("%s has its own copy of /etc/big", r.Node)
			}
		}
	}
}

func TestResolvedStringHidesContent(t *testing.T) {
	d := mustParse(t, map[string]string{
		"site.toml": "[role.a]\nnodes = [\"*\"]\n[role.a.file.\"/etc/token\"]\ncontent = \"hunter2\"\nsecret = true\n",
	})
	resolved, _, _ := d.Resolve([]Node{{Name: "n1"}})
	for _, s := range []string{resolved[0].String(), fmtV(resolved[0])} {
		if strings.Contains(s, "hunter2") {
			t.Errorf("printing a Resolved shows content: %s", s)
		}
	}
}

func fmtV(v any) string { return fmt.Sprintf("%v %+v %s", v, v, v) }
