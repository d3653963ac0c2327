package declaration

import (
	"fmt"
	"strings"
	"testing"
)

// benchFleet declares a fleet of 10,000 nodes with about 100 resources
// each: a base role for every node, roles by env, tier and site label, a
// name-pattern role, and a node section (overriding and adding resources)
// for every overrideEvery-th node.
func benchFleet(b *testing.B, overrideEvery int) (*Declaration, []Node) {
	b.Helper()
	var t strings.Builder
	content := strings.Repeat("a line of configuration\n", 200) // ~5 KB per file
	resources := func(role string, n int) {
		for i := range n {
			switch i % 3 {
			case 0:
				fmt.Fprintf(&t, "[%s.file.\"/etc/%s/%d.conf\"]\ncontent = %q\nmode = \"0644\"\n", role, strings.ReplaceAll(role, ".", "-"), i, content)
			case 1:
				fmt.Fprintf(&t, "[%s.package.%s-pkg%d]\nversion = \"latest\"\n", role, strings.ReplaceAll(role, ".", "-"), i)
			case 2:
				fmt.Fprintf(&t, "[%s.service.%s-svc%d]\nenabled = true\nrunning = true\n", role, strings.ReplaceAll(role, ".", "-"), i)
			}
		}
	}
	fmt.Fprintf(&t, "[role.base]\nnodes = [\"*\"]\n")
	resources("role.base", 40)
	for _, env := range []string{"prod", "staging", "dev"} {
		fmt.Fprintf(&t, "[role.env-%s]\nlabels = { env = %q }\n", env, env)
		resources("role.env-"+env, 10)
	}
	for _, tier := range []string{"web", "db", "cache", "batch"} {
		fmt.Fprintf(&t, "[role.tier-%s]\nlabels = { tier = %q }\n", tier, tier)
		resources("role.tier-"+tier, 30)
	}
	for _, site := range []string{"ams", "fra"} {
		fmt.Fprintf(&t, "[role.site-%s]\nlabels = { site = %q }\n", site, site)
		resources("role.site-"+site, 10)
	}
	fmt.Fprintf(&t, "[role.early]\nnodes = [\"node-0*\", \"node-1*\"]\n")
	resources("role.early", 10)

	var nodes []Node
	for i := range 10000 {
		name := fmt.Sprintf("node-%05d", i)
		nodes = append(nodes, Node{Name: name, Labels: map[string]string{
			"env":  []string{"prod", "staging", "dev"}[i%3],
			"tier": []string{"web", "db", "cache", "batch"}[i%4],
			"site": []string{"ams", "fra"}[i%2],
		}})
		if overrideEvery > 0 && i%overrideEvery == 0 {
			fmt.Fprintf(&t, "[node.%s.package.role-base-pkg1]\nversion = \"1.0-1\"\n", name)
			fmt.Fprintf(&t, "[node.%s.file.\"/etc/node-id\"]\ncontent = %q\n", name, name+"\n")
		}
	}
	d, problems := Parse([]Source{{Name: "fleet.toml", Data: []byte(t.String()), Dir: b.TempDir()}})
	if d == nil {
		b.Fatalf("fleet does not parse:\n%s", problemLines(problems))
	}
	return d, nodes
}

func benchResolve(b *testing.B, overrideEvery int) {
	d, nodes := benchFleet(b, overrideEvery)
	resolved, _, problems := d.Resolve(nodes)
	if HasErrors(problems) {
		b.Fatalf("problems:\n%s", problemLines(problems))
	}
	total := 0
	for _, r := range resolved {
		total += len(r.Resources)
	}
	if n := total / len(nodes); n < 90 || n > 110 {
		b.Fatalf("%d resources per node on average, want about 100", n)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		d.Resolve(nodes)
	}
}

// 10,000 nodes × ~100 resources, one node in ten with a node section.
func BenchmarkResolve(b *testing.B) { benchResolve(b, 10) }

// The worst case for sharing: every node has its own section, so every
// node gets its own slice of specs (content is still shared).
func BenchmarkResolveEveryNodeOverridden(b *testing.B) { benchResolve(b, 1) }

func BenchmarkParse(b *testing.B) {
	d, _ := benchFleet(b, 10)
	_ = d
	var t strings.Builder
	t.WriteString("[role.base]\nnodes = [\"*\"]\n")
	for i := range 1000 {
		fmt.Fprintf(&t, "[role.base.file.\"/etc/f%d\"]\ncontent = \"line\\n\"\nmode = \"0644\"\n", i)
	}
	src := []Source{{Name: "f.toml", Data: []byte(t.String()), Dir: b.TempDir()}}
	b.ResetTimer()
	for b.Loop() {
		if d, _ := Parse(src); d == nil {
			b.Fatal("does not parse")
		}
	}
}
