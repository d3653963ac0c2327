package declaration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/muster-tool/muster/internal/resource"
	"github.com/muster-tool/muster/internal/tomlfile"
)

// FuzzParse feeds arbitrary bytes to the declaration parser: it must never
// panic, every problem must say what is wrong and where, and what resolves
// without errors must pass the host's check.
func FuzzParse(f *testing.F) {
	if ex, err := os.ReadFile(filepath.Join(exampleDir, "site.toml")); err == nil {
		f.Add(ex)
	}
	for _, c := range validationCases {
		f.Add([]byte(c.toml))
	}
	f.Add([]byte(fleetToml))
	f.Add([]byte("[role.r]\nnodes = [\"*\"]\n[role.r.file]\n\"/a\" = { content = \"x\", mode = \"0644\" }\n[node.n.service.a]\nrestart_on = [\"/a\"]\n"))
	// Templates, with vars at every level.
	f.Add([]byte("[vars]\nv = [1, \"a\"]\n[role.r]\nnodes = [\"*\"]\nvars = { w = { x = 1 } }\n[role.r.file.\"/a\"]\ntemplate_content = \"{{ .Node }} {{ join \\\",\\\" .Vars.v }} {{ .Vars.w.x }} {{ index .Labels \\\"env\\\" | default 1 }}\"\n[node.n.vars]\nv = 2\n"))
	f.Add([]byte("[role.r]\nnodes = [\"*\"]\n[role.r.file.\"/a\"]\ntemplate = \"motd\"\nsecret = true\n"))
	// Nesting at the cap and past it, by arrays, inline tables and dotted
	// keys.
	f.Add([]byte("[role.r]\nnodes = " + strings.Repeat("[", 61) + "\"*\"" + strings.Repeat("]", 61) + "\n"))
	f.Add([]byte("[role.r]\nnodes = " + strings.Repeat("[", 62) + "\"*\"" + strings.Repeat("]", 62) + "\n"))
	f.Add([]byte("[role.r.file.\"/a\"]\n" + strings.Repeat("x = {", 61) + strings.Repeat("}", 61) + "\n"))
	f.Add([]byte("[role.r]\n" + strings.Repeat("a.", 70) + "b = 1\n"))
	dir := f.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "motd"), []byte("hello\n"), 0o644); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tomlfile.LocateKeys(string(data))
		d, problems := Parse([]Source{{Name: "f.toml", Data: data, Dir: dir}})
		check := func(ps []Problem) {
			for _, p := range ps {
				if p.Message == "" || p.File != "f.toml" {
					t.Fatalf("problem without message or file: %#v", p)
				}
			}
		}
		check(problems)
		if HasErrors(problems) != (d == nil) {
			t.Fatalf("errors = %t but declaration nil = %t", HasErrors(problems), d == nil)
		}
		if d != nil {
			resolved, _, problems := d.Resolve([]Node{{Name: "n"}, {Name: "web-01", Labels: map[string]string{"env": "prod"}}})
			check(problems)
			// What declare would commit, a host accepts: both sides
			// hold it to resource.Validate.
			if !HasErrors(problems) {
				for _, r := range resolved {
					if err := resource.Validate(r.Resources); err != nil {
						t.Fatalf("node %s: declare accepts what a host refuses: %v", r.Node, err)
					}
				}
			}
		}
	})
}
