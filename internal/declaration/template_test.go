package declaration

import (
	"fmt"
	"strings"
	"testing"

	"github.com/muster-tool/muster/internal/resource"
)

// facts is what a briefing of this muster gives a node.
func facts(hostname string) map[string]any {
	return map[string]any{
		"hostname": hostname, "os_id": "debian", "os_version": "12", "os_codename": "bookworm",
		"arch": "amd64", "cpus": 4, "memory_mb": int64(7962),
		"addresses": []string{"192.0.2.10", "2001:db8::10"}, "ipv4": []string{"192.0.2.10"}, "ipv6": []string{"2001:db8::10"},
	}
}

// content returns the content of resource id among r's.
func content(t *testing.T, r Resolved, id string) string {
	t.Helper()
	for _, s := range r.Resources {
		if s.ID() == id {
			return s.Content
		}
	}
	t.Fatalf("%s has no %s", r.Node, id)
	return ""
}

const templateSite = `[vars]
port = 80
greeting = "hello"
upstreams = ["10.0.0.1", "10.0.0.2"]

[role.web]
nodes = ["web-*"]
vars = { port = 8080 }

[role.web.file."/etc/app.conf"]
template = "files/app.conf.tmpl"
mode = "0644"

[role.web.file."/etc/motd"]
template_content = "{{ .Vars.greeting }} from {{ .Node }}\n"

[role.web.file."/etc/static"]
content = "same everywhere\n"

[node."web-02".vars]
port = 9090
greeting = "hi"
`

const appTemplate = `node {{ .Node }} env {{ .Labels.env }}
listen {{ .Vars.port }}
upstreams {{ join ", " .Vars.upstreams }}
host {{ .Facts.hostname }} cpus {{ .Facts.cpus }} {{ .Facts.os_id }} {{ .Facts.os_version }}
ipv4 {{ join " " .Facts.ipv4 }}
`

// Each node gets its own rendering, from its name, labels, vars (node
// over role over top level) and facts; the rest is shared as before.
func TestTemplatesRenderPerNode(t *testing.T) {
	d := mustParse(t, map[string]string{"site.toml": templateSite, "files/app.conf.tmpl": appTemplate})
	if !d.Templated() {
		t.Fatal("Templated() = false for a declaration with templates")
	}
	resolved, _, problems := d.Resolve([]Node{
		{Name: "web-01", Labels: map[string]string{"env": "prod"}, Facts: facts("web-01.example.org"), FactsFrom: "1.5.0"},
		{Name: "web-02", Labels: map[string]string{"env": "test"}, Facts: facts("web-02.example.org"), FactsFrom: "1.5.0"},
	})
	if len(problems) != 0 {
		t.Fatalf("problems:\n%s", problemLines(problems))
	}
	want := map[string]string{
		"web-01": "node web-01 env prod\nlisten 8080\nupstreams 10.0.0.1, 10.0.0.2\nhost web-01.example.org cpus 4 debian 12\nipv4 192.0.2.10\n",
		"web-02": "node web-02 env test\nlisten 9090\nupstreams 10.0.0.1, 10.0.0.2\nhost web-02.example.org cpus 4 debian 12\nipv4 192.0.2.10\n",
	}
	motd := map[string]string{"web-01": "hello from web-01\n", "web-02": "hi from web-02\n"}
	for _, r := range resolved {
		if got := content(t, r, "file:/etc/app.conf"); got != want[r.Node] {
			t.Errorf("%s: app.conf is\n%s\nwant\n%s", r.Node, got, want[r.Node])
		}
		if got := content(t, r, "file:/etc/motd"); got != motd[r.Node] {
			t.Errorf("%s: motd is %q, want %q", r.Node, got, motd[r.Node])
		}
		if got := content(t, r, "file:/etc/static"); got != "same everywhere\n" {
			t.Errorf("%s: a plain file is %q", r.Node, got)
		}
	}
}

// ResolveEach leaves templated files to its caller, and says where they
// are, also for nodes whose section replaces or adds templated files.
func TestResolveEachNamesTemplatedFiles(t *testing.T) {
	d := mustParse(t, map[string]string{"site.toml": `
[role.all]
nodes = ["*"]
[role.all.file."/a"]
template_content = "a {{ .Node }}"
[role.all.file."/c"]
content = "c"
[role.all.file."/e"]
template_content = "e {{ .Node }}"

[node.n2.file."/b"]
template_content = "b {{ .Node }}"
[node.n2.file."/c"]
template_content = "c {{ .Node }}"
[node.n2.file."/e"]
content = "plain e"
[node.n2.file."/f"]
content = "f"
`})
	wantPos := map[string][]int{"n1": {0, 2}, "n2": {0, 1, 2}}
	wantContent := map[string][]string{
		"n1": {"a n1", "c", "e n1"},
		"n2": {"a n2", "b n2", "c n2", "plain e", "f"},
	}
	rr := NewRenderer()
	_, problems := d.ResolveEach([]Node{{Name: "n1"}, {Name: "n2"}}, func(r Resolved) {
		if got := r.templatedAt(); fmt.Sprint(got) != fmt.Sprint(wantPos[r.Node]) {
			t.Errorf("%s: templated at %v, want %v", r.Node, got, wantPos[r.Node])
		}
		for _, pos := range r.templatedAt() {
			if r.Resources[pos].Content != "" {
				t.Errorf("%s: %s is rendered already", r.Node, r.Resources[pos].ID())
			}
		}
		rendered, ok := rr.Render(r)
		if !ok {
			t.Fatalf("%s: render failed: %s", r.Node, problemLines(rr.Problems()))
		}
		specs := append([]resource.Spec(nil), r.Resources...)
		for _, x := range rendered {
			specs[x.Pos] = x.Spec
		}
		var got []string
		for _, s := range specs {
			got = append(got, s.Content)
		}
		if fmt.Sprint(got) != fmt.Sprint(wantContent[r.Node]) {
			t.Errorf("%s: contents %q, want %q", r.Node, got, wantContent[r.Node])
		}
	})
	if len(problems) != 0 {
		t.Fatalf("problems:\n%s", problemLines(problems))
	}
}

// The error the issue asks for, exactly: the declaration's file and line,
// the resource, the template's line, the missing key, the node, and why.
func TestMissingFactNamesNodeTemplateLineAndKey(t *testing.T) {
	site := "# site.toml\n" + strings.Repeat("\n", 8) + `[role.web]
nodes = ["web-*"]

[role.web.file."/etc/nginx/nginx.conf"]
template = "files/nginx.conf.tmpl"
`
	tmpl := "user www-data;\nworker_processes {{ .Facts.cpus }};\n# {{ .Facts.memory_mb }} MiB\n"
	d := mustParse(t, map[string]string{"site.toml": site, "files/nginx.conf.tmpl": tmpl})
	_, _, problems := d.Resolve([]Node{
		{Name: "web-01", Facts: facts("web-01"), FactsFrom: "1.5.0"},
		{Name: "web-03", FactsFrom: "1.4"},
	})
	want := `site.toml:13: role.web.file."/etc/nginx/nginx.conf": template files/nginx.conf.tmpl:2: no fact "cpus" for node web-03 (its newest briefing is from muster 1.4)`
	if len(problems) != 1 || problems[0].String() != want || problems[0].Warning {
		t.Fatalf("problems:\n%s\nwant\n%s", problemLines(problems), want)
	}
}

// A key a node lacks is an error wherever it is used, never an empty
// string; every node's problems are collected, and one problem shared by
// many nodes is shown once with their count.
func TestMissingKeysAreErrorsForEveryNode(t *testing.T) {
	site := `[role.web]
nodes = ["*"]

[role.web.file."/etc/app.conf"]
template = "app.tmpl"
`
	tmpl := `{{ .Node }}
{{ if eq .Node "n1" }}{{ .Vars.only_n1 }}{{ end }}
{{ .Labels.rack }}
{{ .Facts.memroy_mb }}
`
	d := mustParse(t, map[string]string{"site.toml": site, "app.tmpl": tmpl})
	_, _, problems := d.Resolve([]Node{
		{Name: "n1", Labels: map[string]string{"rack": "r1"}, Facts: facts("n1"), FactsFrom: "1.5.0"},
		{Name: "n2", Labels: map[string]string{"env": "prod", "group": "a"}, Facts: facts("n2"), FactsFrom: "1.5.0"},
		{Name: "n3", Facts: facts("n3"), FactsFrom: "1.5.0"},
		{Name: "n4", Facts: facts("n4"), FactsFrom: "1.5.0"},
	})
	got := problemLines(problems)
	for _, w := range []string{
		`site.toml:4: role.web.file."/etc/app.conf": template app.tmpl:2: no var "only_n1" for node n1` + "\n",
		`template app.tmpl:3: no label "rack" for node n2 (its labels are env, group)` + "\n",
		`template app.tmpl:3: no label "rack" for node n3 and 1 more (it has no labels)` + "\n",
	} {
		if !strings.Contains(got, w) {
			t.Errorf("problems lack %q:\n%s", w, got)
		}
	}
	// n1 stops at its missing var; the others reach their missing label
	// first: one error per node and file.
	if len(problems) != 3 {
		t.Errorf("%d problems, want 3:\n%s", len(problems), got)
	}
	_, _, problems = d.Resolve([]Node{{Name: "n2", Labels: map[string]string{"rack": "r2"}, Facts: facts("n2"), FactsFrom: "1.5.0"}})
	if got := problemLines(problems); !strings.Contains(got, `template app.tmpl:4: no fact "memroy_mb" for node n2 (its newest briefing has addresses, arch, cpus, hostname, ipv4, ipv6, memory_mb, os_codename, os_id, os_version)`) {
		t.Errorf("a misspelt fact:\n%s", got)
	}
}

// Templates reach nothing outside their data: the functions of other
// template systems that read the environment, files or commands are not
// defined, which makes a declaration that calls one invalid.
func TestTemplatesCannotReachTheMachine(t *testing.T) {
	for _, call := range []string{`env "HOME"`, `getenv "HOME"`, `expandenv "$HOME"`, `exec "id"`, `readFile "/etc/shadow"`, `file "/etc/shadow"`, `include "x"`, `os`, `now`} {
		t.Run(call, func(t *testing.T) {
			_, problems := parseFiles(t, map[string]string{"site.toml": roleHead + "[role.r.file.\"/x\"]\ntemplate_content = '''\nfirst\n{{ " + call + " }}\n'''\n"})
			name := strings.Fields(call)[0]
			want := fmt.Sprintf(`site.toml:4: role.r.file."/x".template_content: template template_content:2: function %q not defined`, name)
			if len(problems) != 1 || problems[0].String() != want {
				t.Errorf("problems:\n%swant\n%s", problemLines(problems), want)
			}
		})
	}
}

func TestTemplateValidation(t *testing.T) {
	cases := []struct {
		name  string
		toml  string
		files map[string]string
		want  []want
	}{
		{"template and content", roleHead + "[role.r.file.\"/x\"]\ntemplate_content = \"a\"\ncontent = \"b\"\n", nil,
			[]want{{4, `role.r.file."/x".template_content`, "a file takes one of content, source, template and template_content", false}}},
		{"template and template_content", roleHead + "[role.r.file.\"/x\"]\ntemplate = \"t\"\ntemplate_content = \"b\"\n", map[string]string{"t": "x"},
			[]want{{5, `role.r.file."/x".template_content`, "template or template_content, not both", false}}},
		{"missing template file", roleHead + "[role.r.file.\"/x\"]\ntemplate = \"files/x.tmpl\"\n", nil,
			[]want{{4, `role.r.file."/x".template`, `template file "files/x.tmpl" does not exist`, false}}},
		{"template is a directory", roleHead + "[role.r.file.\"/x\"]\ntemplate = \"files\"\n", map[string]string{"files/a": ""},
			[]want{{4, `role.r.file."/x".template`, `template "files" is a directory`, false}}},
		{"template not text", roleHead + "[role.r.file.\"/x\"]\ntemplate = \"t\"\n", map[string]string{"t": "\xff\xfe"},
			[]want{{4, `role.r.file."/x".template`, `not UTF-8 text`, false}}},
		{"empty template path", roleHead + "[role.r.file.\"/x\"]\ntemplate = \"\"\n", nil,
			[]want{{4, `role.r.file."/x".template`, `is empty`, false}}},
		{"template syntax error", roleHead + "[role.r.file.\"/x\"]\ntemplate = \"t\"\n", map[string]string{"t": "ok\nok\n{{ if .Node }}"},
			[]want{{4, `role.r.file."/x".template`, `template t:3: unexpected EOF`, false}}},
		{"template on an absent file", roleHead + "[role.r.file.\"/x\"]\nstate = \"absent\"\ntemplate_content = \"a\"\n", nil,
			[]want{{5, `role.r.file."/x".template_content`, "ignored: the file is declared absent", true}}},
		{"vars not a table", "vars = 3\n" + roleHead, nil,
			[]want{{1, "vars", "must be a table of vars", false}}},
		{"a date-time var", roleHead + "vars = { when = 2026-01-02T03:04:05Z }\n", nil,
			[]want{{3, "role.r.vars.when", "a var cannot be a date-time", false}}},
		{"one var two values at the top level", "[vars]\nport = 1\n", map[string]string{"z.toml": "[vars]\nport = 2\n"},
			[]want{{2, "vars.port", "var port is also declared for the top level at site.toml:2 with another value", false}}},
		{"vars in a node section", "[node.n1.vars]\nport = 1\n" + roleHead, nil, nil},
		{"one file two templates", roleHead + "[role.r.file.\"/x\"]\ntemplate_content = \"a\"\n[node.n.file.\"/x\"]\ntemplate_content = \"b\"\n", nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{"site.toml": tc.toml}
			for k, v := range tc.files {
				files[k] = v
			}
			_, problems := parseFiles(t, files)
			if len(problems) != len(tc.want) {
				t.Fatalf("problems:\n%swant %d", problemLines(problems), len(tc.want))
			}
			for i, w := range tc.want {
				p := problems[i]
				if p.Line != w.line || p.Key != w.key || !strings.Contains(p.Message, w.message) || p.Warning != w.warning {
					t.Errorf("problem %d: %s (warning %v), want line %d key %s containing %q (warning %v)", i, p, p.Warning, w.line, w.key, w.message, w.warning)
				}
			}
		})
	}
}

// Two roles that give one node one var differently conflict, for a node
// that renders a template; its node section settles it.
func TestVarConflicts(t *testing.T) {
	d := mustParse(t, map[string]string{"site.toml": `[role.a]
nodes = ["*"]
vars = { port = 1 }
[role.a.file."/x"]
template_content = "{{ .Vars.port }}"

[role.b]
nodes = ["n*"]
vars = { port = 2 }

[role.c]
nodes = ["*"]
vars = { port = 3 }

[node.n3.vars]
port = 4
`})
	resolved, _, problems := d.Resolve([]Node{{Name: "n1"}, {Name: "n2"}, {Name: "n3"}, {Name: "m1"}})
	got := problemLines(problems)
	wantB := `site.toml:9: role.b.vars.port: node n1 and 1 more: var port is declared differently by role b here and by role a at site.toml:3`
	wantC := `site.toml:13: role.c.vars.port: node n1 and 2 more: var port is declared differently by role c here and by role a at site.toml:3`
	if len(problems) != 2 || !strings.Contains(got, wantB) || !strings.Contains(got, wantC) {
		t.Errorf("problems:\n%swant\n%s\n%s", got, wantB, wantC)
	}
	for _, r := range resolved {
		if r.Node == "n3" && content(t, r, "file:/x") != "4" {
			t.Errorf("n3's own var does not settle it: %q", content(t, r, "file:/x"))
		}
	}
}

// Two roles declaring one file with different templates conflict like
// any other setting.
func TestDifferentTemplatesConflict(t *testing.T) {
	d := mustParse(t, map[string]string{"site.toml": `[role.a]
nodes = ["*"]
[role.a.file."/x"]
template_content = "{{ .Node }} a"

[role.b]
nodes = ["*"]
[role.b.file."/x"]
template_content = "{{ .Node }} b"

[role.c]
nodes = ["*"]
[role.c.file."/x"]
template_content = "{{ .Node }} a"
`})
	_, _, problems := d.Resolve([]Node{{Name: "n1"}})
	if len(problems) != 1 || !strings.Contains(problems[0].String(), `site.toml:8: role.b.file."/x": node n1: file:/x is declared differently by role b here and by role a at site.toml:3`) {
		t.Errorf("problems:\n%s", problemLines(problems))
	}
}

func TestTemplateFunctions(t *testing.T) {
	cases := []struct {
		name, tmpl, want string
	}{
		{"join a var", `{{ join "," .Vars.list }}`, "a,b,3"},
		{"join a fact", `{{ .Facts.addresses | join " " }}`, "192.0.2.10 2001:db8::10"},
		{"default for a key index does not find", `{{ index .Vars "nope" | default "80" }}`, "80"},
		{"default for an empty string", `{{ default "x" .Vars.empty }}`, "x"},
		{"default keeps a value", `{{ default 1 .Vars.zero }}`, "0"},
		{"default for a missing label", `{{ index .Labels "rack" | default "none" }}`, "none"},
		{"shellquote", `{{ shellquote .Vars.quote }}`, `'it'\''s $HOME'`},
		{"shellquote a list", `{{ shellquote .Vars.list }}`, `'a' 'b' '3'`},
		{"toml string", `x = {{ toml .Vars.quote }}`, `x = "it's $HOME"`},
		{"toml escapes", `x = {{ toml .Vars.nasty }}`, `x = "a\"b\\c\n"`},
		{"toml list", `x = {{ toml .Vars.list }}`, `x = ["a", "b", 3]`},
		{"toml number", `x = {{ toml .Facts.cpus }} {{ toml .Vars.ratio }}`, `x = 4 2.0`},
		{"a table var", `{{ .Vars.db.host }}:{{ .Vars.db.port }}`, "db1:5432"},
		{"builtins", `{{ len .Vars.list }} {{ printf "%03d" .Vars.zero }} {{ if eq .Node "n1" }}yes{{ end }}`, "3 000 yes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := mustParse(t, map[string]string{"site.toml": `[vars]
list = ["a", "b", 3]
empty = ""
zero = 0
ratio = 2.0
quote = "it's $HOME"
nasty = "a\"b\\c\n"
db = { host = "db1", port = 5432 }
` + roleHead + "[role.r.file.\"/x\"]\ntemplate = \"t\"\n", "t": tc.tmpl})
			resolved, _, problems := d.Resolve([]Node{{Name: "n1", Facts: facts("n1"), FactsFrom: "1.5.0"}})
			if len(problems) != 0 {
				t.Fatalf("problems:\n%s", problemLines(problems))
			}
			if got := content(t, resolved[0], "file:/x"); got != tc.want {
				t.Errorf("rendered %q, want %q", got, tc.want)
			}
		})
	}
	for _, tc := range []struct{ name, tmpl, want string }{
		{"join a table", `{{ join "," .Vars.db }}`, `template t:1: for node n1: join "," .Vars.db: error calling join: join wants a list, not a table`},
		{"missing key of a table var", `{{ .Vars.db.user }}`, `template t:1: no var "db.user" for node n1`},
		{"a field of a number", `{{ .Vars.zero.x }}`, `template t:1: for node n1: .Vars.zero.x: can't evaluate field x in type interface {}`},
		{"half a character", `{{ slice .Vars.e 0 1 }}`, `template t: rendered for node n1, it is not UTF-8 text`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := mustParse(t, map[string]string{"site.toml": "[vars]\nzero = 0\ne = \"é\"\ndb = { host = \"db1\" }\n" + roleHead + "[role.r.file.\"/x\"]\ntemplate = \"t\"\n", "t": tc.tmpl})
			_, _, problems := d.Resolve([]Node{{Name: "n1", Facts: facts("n1"), FactsFrom: "1.5.0"}})
			if len(problems) != 1 || !strings.HasSuffix(problems[0].String(), tc.want) {
				t.Errorf("problems:\n%swant one ending %q", problemLines(problems), tc.want)
			}
		})
	}
}

// A template that would render without end stops at the cap.
func TestRenderedSizeIsCapped(t *testing.T) {
	d := mustParse(t, map[string]string{"site.toml": roleHead + "[role.r.file.\"/x\"]\ntemplate_content = \"{{ range 100000000 }}0123456789{{ end }}\"\n"})
	_, _, problems := d.Resolve([]Node{{Name: "n1"}})
	want := fmt.Sprintf(`site.toml:3: role.r.file."/x": template template_content: rendered for node n1, it is larger than %d bytes (the cap on a rendered file)`, MaxRendered)
	if len(problems) != 1 || problems[0].String() != want {
		t.Errorf("problems:\n%swant\n%s", problemLines(problems), want)
	}
}

// A secret file's template never shows in a message, not even the action
// that failed.
func TestSecretTemplateErrorsQuoteNothing(t *testing.T) {
	d, problems := parseFiles(t, map[string]string{"site.toml": roleHead + `[role.r.file."/x"]
secret = true
template_content = "{{ printf \"TOPSECRET-%s\" .Vars.v.TOPSECRET }}"
[role.r.file."/y"]
secret = true
template_content = "{{ TOPSECRET }}"
`})
	if got := problemLines(problems); strings.Contains(got, "TOPSECRET") || len(problems) != 1 {
		t.Errorf("parse problems quote the secret template:\n%s", got)
	}
	if d != nil {
		t.Fatal("a declaration with an undefined function parses")
	}
	d = mustParse(t, map[string]string{"site.toml": "[vars]\nv = 3\n" + roleHead + `[role.r.file."/x"]
secret = true
template_content = "{{ printf \"TOPSECRET-%s\" .Vars.v.TOPSECRET }}"
`})
	_, _, problems = d.Resolve([]Node{{Name: "n1"}})
	if got := problemLines(problems); strings.Contains(got, "TOPSECRET") || len(problems) != 1 {
		t.Errorf("render problems quote the secret template:\n%s", got)
	}
}
