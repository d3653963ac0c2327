package declaration

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/muster-tool/muster/internal/resource"
)

const (
	exampleDir  = "../../examples/declaration"
	manPage     = "../../man/muster-declaration.5"
	exampleFrom = `.\" BEGIN examples/declaration/site.toml`
	exampleTo   = `.\" END examples/declaration/site.toml`
)

// The example operators copy from must stay valid as the format evolves.
func TestExampleParsesWithoutProblems(t *testing.T) {
	srcs, err := Load([]string{filepath.Join(exampleDir, "site.toml")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, problems := Parse(srcs)
	for _, p := range problems {
		t.Errorf("problem in the example: %s", p)
	}
	if d == nil {
		t.FailNow()
	}
	if !d.Prune() {
		t.Error("the example sets prune = true, Prune() says false")
	}

	nodes := []Node{
		{Name: "web-01", Labels: map[string]string{"env": "prod", "monitoring": "yes"}, Facts: facts("web-01"), FactsFrom: "1.5.0"},
		{Name: "web-02", Labels: map[string]string{"env": "prod"}, Facts: facts("web-02"), FactsFrom: "1.5.0"},
		{Name: "www1", Labels: map[string]string{"env": "prod"}, Facts: facts("www1"), FactsFrom: "1.5.0"},
		{Name: "db-01", Labels: map[string]string{"env": "prod", "monitoring": "yes"}, Facts: facts("db-01"), FactsFrom: "1.5.0"},
	}
	resolved, unmatched, problems := d.Resolve(nodes)
	for _, p := range problems {
		t.Errorf("problem resolving the example: %s", p)
	}
	if len(unmatched) != 0 {
		t.Errorf("unmatched = %v, want none (role.base selects every node)", unmatched)
	}
	byNode := map[string]map[string]resource.Spec{}
	for _, r := range resolved {
		byNode[r.Node] = map[string]resource.Spec{}
		for _, s := range r.Resources {
			byNode[r.Node][s.ID()] = s
		}
	}
	motd, err := os.ReadFile(filepath.Join(exampleDir, "files", "motd"))
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		node, id string
		want     func(resource.Spec) bool
		what     string
	}{
		{"web-01", "file:/etc/motd", func(s resource.Spec) bool { return strings.HasPrefix(s.Content, "web-01: canary") }, "the node section's motd"},
		{"web-02", "file:/etc/motd", func(s resource.Spec) bool { return s.Content == string(motd) }, "role.base's motd read from files/motd"},
		{"web-01", "package:nginx", func(s resource.Spec) bool { return s.Version == "1.22.1-9" }, "the pinned nginx"},
		{"web-02", "package:nginx", func(s resource.Spec) bool { return s.Version == "latest" }, "nginx latest"},
		{"www1", "service:nginx.service", func(s resource.Spec) bool { return isTrue(s.Enabled) && isTrue(s.Running) && len(s.RestartOn) == 2 }, "the nginx service"},
		{"web-02", "file:/etc/nginx/upstream-token", func(s resource.Spec) bool { return s.Secret && s.Mode == "0600" }, "a secret file"},
		{"db-01", "service:prometheus-node-exporter.service", func(s resource.Spec) bool { return isTrue(s.Running) }, "the exporter (label selection)"},
		{"db-01", "package:muster", func(s resource.Spec) bool { return s.Version == "1.4.2-1" && s.Order == 20 }, "muster itself"},
		{"db-01", "file:/etc/resolv.conf", func(s resource.Spec) bool { return s.ReplaceSymlink }, "a file that may replace a symlink"},
		{"web-02", "directory:/srv/www/uploads", func(s resource.Spec) bool { return s.Mode == "2775" && s.SpecialBits }, "a setgid directory"},
		{"web-02", "file:/usr/local/share/ca-certificates/internal-ca.der", func(s resource.Spec) bool { return s.Encoding == "base64" }, "a binary file"},
		{"web-02", "group:web", func(s resource.Spec) bool { return s.GID != nil && *s.GID == 2001 }, "the web group"},
		{"web-02", "user:deploy", func(s resource.Spec) bool { return s.Group == "web" && len(s.Groups) == 1 && s.Shell == "/bin/bash" }, "the deploy user"},
		{"web-02", "file:/etc/sudoers.d/deploy", func(s resource.Spec) bool { return len(s.Validate) == 5 && s.Validate[4] == "%s" }, "a validated file"},
		{"web-02", "directory:/srv/www/example.org", func(s resource.Spec) bool { return s.Purge && s.Owner == "deploy" }, "the tree's own directory"},
		{"web-02", "file:/srv/www/example.org/css/site.css", func(s resource.Spec) bool { return s.Mode == "0644" && s.Group == "web" }, "a file of the tree"},
		{"web-02", "symlink:/srv/www/example.org/home.html", func(s resource.Spec) bool { return s.Target == "index.html" }, "a symlink of the tree"},
		{"web-01", "file:/etc/nginx/nginx.conf", func(s resource.Spec) bool {
			return strings.Contains(s.Content, "# web-01: rendered") && strings.Contains(s.Content, "worker_processes 4;") &&
				strings.Contains(s.Content, "worker_connections 4096;") && strings.Contains(s.Content, "server_name web-01.prod.example.org;") &&
				strings.Contains(s.Content, "\t\tserver 10.0.1.10:8080;\n\t\tserver 10.0.1.11:8080;\n\t}") && strings.Contains(s.Content, "listen 80;")
		}, "nginx.conf rendered with the node section's var"},
		{"web-02", "file:/etc/nginx/nginx.conf", func(s resource.Spec) bool {
			return strings.Contains(s.Content, "worker_connections 1024;") && strings.Contains(s.Content, "server_name web-02.prod.example.org;")
		}, "nginx.conf rendered with the role's var"},
		{"db-01", "file:/etc/default/prometheus-node-exporter", func(s resource.Spec) bool {
			return s.Content == "ARGS='--web.listen-address=192.0.2.10:9100'\n# questions to ops@example.org\n"
		}, "the exporter's arguments rendered from the node's address and a top-level var"},
	}
	for _, c := range checks {
		s, ok := byNode[c.node][c.id]
		if !ok || !c.want(s) {
			t.Errorf("%s: %s is not %s", c.node, c.id, c.what)
		}
	}
	if _, ok := byNode["db-01"]["package:nginx"]; ok {
		t.Error("db-01 is not a web node but got nginx")
	}
	if _, ok := byNode["web-02"]["service:prometheus-node-exporter.service"]; ok {
		t.Error("web-02 has no monitoring label but got the exporter")
	}
}

// The man page shows the example verbatim; this keeps the two from
// drifting apart. (The example must therefore avoid backslashes and lines
// starting with "." or "'", which roff would read as markup.)
func TestManPageEmbedsExample(t *testing.T) {
	man, err := os.ReadFile(manPage)
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile(filepath.Join(exampleDir, "site.toml"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := bytes.Cut(man, []byte(exampleFrom+"\n.Bd -literal\n"))
	if !ok {
		t.Fatalf("%s has no %q line followed by .Bd -literal", manPage, exampleFrom)
	}
	embedded, _, ok := bytes.Cut(rest, []byte(".Ed\n"+exampleTo+"\n"))
	if !ok {
		t.Fatalf("%s has no .Ed followed by %q", manPage, exampleTo)
	}
	if !bytes.Equal(embedded, example) {
		t.Errorf("the example in %s differs from examples/declaration/site.toml; copy the file between the markers", manPage)
	}
	for i, line := range strings.Split(string(example), "\n") {
		if strings.Contains(line, `\`) || strings.HasPrefix(line, ".") || strings.HasPrefix(line, "'") {
			t.Errorf("site.toml:%d: roff would not show this line verbatim in the man page", i+1)
		}
	}
}

func isTrue(b *bool) bool { return b != nil && *b }
