package declare

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"

	"github.com/muster-tool/muster/internal/brief"
	"github.com/muster-tool/muster/internal/resource"
)

const templatedSite = `
[vars]
greeting = "hello"

[role.web]
nodes = ["web-*"]

[role.web.file."/etc/motd"]
content = "managed by muster\n"

[role.web.file."/etc/app.conf"]
template = "app.conf.tmpl"
mode = "0640"

[role.web.file."/etc/token"]
template_content = "{{ .Vars.greeting }} TOKEN-OF-{{ .Node }}\n"
secret = true

[role.web.package.nginx]
version = "latest"
`

const appConf = "host {{ .Facts.hostname }}\nrack {{ .Labels.rack }}\n"

// withFacts gives node name a briefing of this muster, with facts.
func (f *fixture) withFacts(name, hostname string) {
	b := passed(name)
	b.Muster = "1.5.0"
	b.Facts = &brief.Facts{Hostname: hostname, OSID: "debian", OSVersion: "12", Arch: "amd64", CPUs: 2, MemoryMB: 2048, Addresses: []string{"192.0.2.1"}}
	f.briefs[f.reg.Enrolled(name).NodeID] = b
}

func contentOf(specs []resource.Spec, id string) (string, bool) {
	for _, s := range specs {
		if s.ID() == id {
			return s.Content, true
		}
	}
	return "", false
}

// Each node's bundle carries the file rendered for it, and only that: the
// host receives exact bytes, as for any content.
func TestTemplatedFilesDifferPerNode(t *testing.T) {
	f := newFixture(t)
	f.enrol("web-1", map[string]string{"rack": "a"})
	f.enrol("web-2", map[string]string{"rack": "b"})
	f.withFacts("web-1", "web-1.example.org")
	f.withFacts("web-2", "web-2.example.org")
	res := f.mustDeclare(f.parse(templatedSite, map[string]string{"app.conf.tmpl": appConf}), Options{})
	if len(res.Nodes) != 2 {
		t.Fatalf("result %+v", res)
	}
	for _, n := range []struct{ name, conf string }{
		{"web-1", "host web-1.example.org\nrack a\n"},
		{"web-2", "host web-2.example.org\nrack b\n"},
	} {
		nd := f.mustOpen(n.name, 1)
		if got, _ := contentOf(nd.Resources, "file:/etc/app.conf"); got != n.conf {
			t.Errorf("%s: app.conf = %q, want %q", n.name, got, n.conf)
		}
		if got, _ := contentOf(nd.Resources, "file:/etc/token"); got != "hello TOKEN-OF-"+n.name+"\n" {
			t.Errorf("%s: token = %q", n.name, got)
		}
		if got, _ := contentOf(nd.Resources, "file:/etc/motd"); got != "managed by muster\n" {
			t.Errorf("%s: motd = %q", n.name, got)
		}
		if !slices.Equal(ids(nd.Resources), []string{"file:/etc/app.conf", "file:/etc/motd", "file:/etc/token", "package:nginx"}) {
			t.Errorf("%s: resources %v", n.name, ids(nd.Resources))
		}
	}
	// The same again is unchanged: rendering is deterministic.
	if res := f.mustDeclare(f.parse(templatedSite, map[string]string{"app.conf.tmpl": appConf}), Options{}); !res.Unchanged {
		t.Errorf("the same declaration again: %+v, want unchanged", res)
	}
}

// What changes in a node's rendering shows as a change of that node's
// file in a dry run, and only for that node; a secret's rendering never
// shows.
func TestDryRunShowsTemplatedChangesPerNode(t *testing.T) {
	f := newFixture(t)
	f.enrol("web-1", map[string]string{"rack": "a"})
	f.enrol("web-2", map[string]string{"rack": "b"})
	f.withFacts("web-1", "web-1.example.org")
	f.withFacts("web-2", "web-2.example.org")
	f.mustDeclare(f.parse(templatedSite, map[string]string{"app.conf.tmpl": appConf}), Options{})
	f.withFacts("web-2", "web-2.example.net")
	src := templatedSite + "\n[node.web-1.vars]\ngreeting = \"hi\"\n"
	before := files(t, f.dir)
	res := f.mustDeclare(f.parse(src, map[string]string{"app.conf.tmpl": appConf}), Options{DryRun: true})
	if after := files(t, f.dir); !slices.Equal(before, after) {
		t.Errorf("a dry run wrote:\nbefore %v\nafter  %v", before, after)
	}
	want := []NodeChange{
		{Name: "web-1", NodeID: f.reg.Enrolled("web-1").NodeID, Resources: 4, Changed: []string{"file:/etc/token"}},
		{Name: "web-2", NodeID: f.reg.Enrolled("web-2").NodeID, Resources: 4, Changed: []string{"file:/etc/app.conf"}},
	}
	out, _ := json.Marshal(res)
	changes := takeChanges(res.Nodes)
	if !reflect.DeepEqual(res.Nodes, want) {
		t.Errorf("changes =\n%+v\nwant\n%+v", res.Nodes, want)
	}
	if c := changes["web-1"]; len(c) != 1 || c[0].Content != "content changed (secret, not shown)" {
		t.Errorf("web-1's secret: %+v", c)
	}
	if c := changes["web-2"]; len(c) != 1 || !strings.Contains(c[0].Content, "\n-host web-2.example.org\n+host web-2.example.net\n") {
		t.Errorf("web-2's rendering: %+v", c)
	}
	if strings.Contains(string(out), "TOKEN-OF") {
		t.Errorf("the result shows a secret's rendering: %s", out)
	}
}

// A key some node lacks refuses the whole declaration before anything is
// written, with every node's problems; a node that gets nothing (its
// briefing failed) is not rendered for, so it is no problem.
func TestRenderErrorsRefuseBeforeWriting(t *testing.T) {
	f := newFixture(t)
	f.enrol("web-1", map[string]string{"rack": "a"})
	f.enrol("web-2", nil)
	f.enrol("web-3", map[string]string{"rack": "c"})
	f.enrol("web-4", map[string]string{"rack": "d"})
	f.withFacts("web-1", "web-1.example.org")
	f.withFacts("web-2", "web-2.example.org")
	old := passed("web-3")
	old.Muster = "1.4"
	f.briefs[f.reg.Enrolled("web-3").NodeID] = old
	f.briefs[f.reg.Enrolled("web-4").NodeID] = failedBriefing("web-4")
	d := f.parse(templatedSite, map[string]string{"app.conf.tmpl": appConf})
	before := files(t, f.dir)
	_, err := f.declare(d, Options{})
	var pe *ProblemsError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v, want a ProblemsError", err)
	}
	var got []string
	for _, p := range pe.Problems {
		p.File = filepath.Base(p.File)
		got = append(got, p.String())
	}
	want := []string{
		`site.toml:11: role.web.file."/etc/app.conf": template app.conf.tmpl:1: no fact "hostname" for node web-3 (its newest briefing is from muster 1.4)`,
		`site.toml:11: role.web.file."/etc/app.conf": template app.conf.tmpl:2: no label "rack" for node web-2 (it has no labels)`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if after := files(t, f.dir); !slices.Equal(before, after) {
		t.Errorf("a refused declaration wrote:\nbefore %v\nafter  %v", before, after)
	}
}

// Nodes that share their roles share every entry but their rendered
// files, and nodes whose rendering comes out the same share that too: the
// manifest lists each distinct resource once.
func TestRenderedFilesShareWhatIsTheSame(t *testing.T) {
	f := newFixture(t)
	for _, n := range []string{"web-1", "web-2", "web-3"} {
		f.enrol(n, map[string]string{"rack": "a"})
		f.withFacts(n, "same.example.org")
	}
	src := templatedSite + "\n[node.web-3.file.\"/etc/extra\"]\ncontent = \"x\"\n"
	p, err := newPlan(f.ctx, f.reg, f.briefs, f.parse(src, map[string]string{"app.conf.tmpl": appConf}))
	if err != nil {
		t.Fatal(err)
	}
	// motd, nginx, extra, one app.conf for all, three tokens
	if len(p.table) != 7 {
		var got []string
		for _, e := range p.table {
			got = append(got, e.id)
		}
		t.Errorf("the table has %d entries, want 7: %v", len(p.table), got)
	}
	a, b := p.nodes[0].entries, p.nodes[1].entries
	for i := range a {
		if same := a[i] == b[i]; same != (a[i].id != "file:/etc/token") {
			t.Errorf("%s: shared %v", a[i].id, same)
		}
	}
}

// A rendered file's entry is its declared entry with the content added:
// it must decode as exactly the spec it stands for, whatever the content.
func TestRenderedEntryIsTheSpecs(t *testing.T) {
	c := newEntryCache()
	base := resource.Spec{Kind: resource.File, Path: "/etc/app.conf", Mode: "0640", Owner: "root", Group: "adm", Secret: true, ReplaceSymlink: true, Order: 3}
	// The second entry an encoder writes, as most are: it starts with a
	// blank line.
	bases := newEntryCache()
	if _, err := bases.get(&resource.Spec{Kind: resource.Package, Name: "first"}); err != nil {
		t.Fatal(err)
	}
	be, err := bases.get(&base)
	if err != nil {
		t.Fatal(err)
	}
	for _, content := range []string{"", "plain\n", "quote \" backslash \\ tab \t cr \r nul \x00 esc \x1b del \x7f\n", "''' \"\"\" triple\n", "unicode é ü 漢字 \u2028\n", strings.Repeat("long line ", 1000)} {
		s := base
		s.Content = content
		e, err := c.rendered(&s, be)
		if err != nil {
			t.Fatal(err)
		}
		var got resourceTable
		md, err := toml.Decode(string(e.toml), &got)
		if err != nil || len(md.Undecoded()) > 0 || len(got.Resources) != 1 {
			t.Fatalf("content %q: %v, undecoded %v, %d resources:\n%s", content, err, md.Undecoded(), len(got.Resources), e.toml)
		}
		if !sameSpec(&got.Resources[0], &s) {
			t.Errorf("content %q decodes as\n%+v\nwant\n%+v", content, got.Resources[0], s)
		}
		if want, _ := newEntryCache().get(&s); e.digest != want.digest || e.id != want.id || e.cost != want.cost || string(e.line) != string(want.line) {
			t.Errorf("content %q: entry %s %s %d, want %s %s %d", content, e.id, e.digest, e.cost, want.id, want.digest, want.cost)
		}
		if again, _ := c.rendered(&s, be); again != e {
			t.Errorf("content %q: a second rendering of the same is a new entry", content)
		}
	}
}

// A wave's declare renders for the nodes it holds too: what would fail
// when the wave is promoted fails now, before the canary gets anything.
func TestWaveRendersForHeldNodes(t *testing.T) {
	f := newFixture(t)
	f.enrol("web-1", map[string]string{"rack": "a"})
	f.enrol("web-2", nil)
	f.withFacts("web-1", "web-1.example.org")
	f.withFacts("web-2", "web-2.example.org")
	d := f.parse(templatedSite+"\n[rollout.wave.canary]\nnodes = [\"web-1\"]\n", map[string]string{"app.conf.tmpl": appConf})
	w, err := d.Wave([]string{"canary"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	before := files(t, f.dir)
	_, err = f.declare(d, Options{Wave: w})
	var pe *ProblemsError
	if !errors.As(err, &pe) || len(pe.Problems) != 1 || !strings.Contains(pe.Problems[0].Message, `no label "rack" for node web-2`) {
		t.Fatalf("err = %v, want web-2's missing label", err)
	}
	if after := files(t, f.dir); !slices.Equal(before, after) {
		t.Errorf("a refused declaration wrote:\nbefore %v\nafter  %v", before, after)
	}
}
