package tomlfile

import (
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

// Problems point at the line defining the key at fault, whatever TOML
// form the operator used to write it.
func TestLocateKeys(t *testing.T) {
	doc := `# comment with [brackets] and key = "value"
top = 1
[role.web]                      # line 3
nodes = [
  "web-*",  # a comment inside an array
  "www?",
]
labels = { env = "prod", "tier" = 'front' }
[role.web.file."/etc/a.b"]      # line 9
content = """
not = "a key"
[not.a.table]
"""""
mode = "0644"
[role.web.file.'/etc/lit']
content = '''
x = 1
'''
[ role . "web" . package . "a\u0062c" ]
when = 1979-05-27 07:32:00Z
after.dotted = true
[[arr]]
x = 1
[[arr]]
y = 2
[role.web.file.""]
inline = { a = { b = [ { c = 1 } ] } }
multi = { a = 1,
  b = 2 }
`
	// The example must be TOML the parser accepts, or the test is moot.
	var v map[string]any
	if _, err := toml.Decode(doc, &v); err != nil {
		t.Fatalf("test document is not valid TOML: %v", err)
	}
	lines := LocateKeys(doc)
	cases := []struct {
		key  []string
		line int
	}{
		{[]string{"top"}, 2},
		{[]string{"role"}, 3},
		{[]string{"role", "web"}, 3},
		{[]string{"role", "web", "nodes"}, 4},
		{[]string{"role", "web", "labels"}, 8},
		{[]string{"role", "web", "labels", "tier"}, 8},
		{[]string{"role", "web", "file"}, 9},
		{[]string{"role", "web", "file", "/etc/a.b"}, 9},
		{[]string{"role", "web", "file", "/etc/a.b", "content"}, 10},
		{[]string{"role", "web", "file", "/etc/a.b", "mode"}, 14},
		{[]string{"role", "web", "file", "/etc/lit", "content"}, 16},
		{[]string{"role", "web", "package", "abc"}, 19},
		{[]string{"role", "web", "package", "abc", "when"}, 20},
		{[]string{"role", "web", "package", "abc", "after", "dotted"}, 21},
		{[]string{"arr", "x"}, 23},
		{[]string{"arr", "y"}, 25},
		{[]string{"role", "web", "file", "", "inline", "a", "b"}, 27},
		{[]string{"role", "web", "file", "", "multi", "b"}, 29},
		// Not defined: the nearest defined parent's line.
		{[]string{"role", "web", "file", "/etc/a.b", "owner"}, 9},
		{[]string{"not"}, 0},
	}
	for _, c := range cases {
		if got := lines.Line(c.key...); got != c.line {
			t.Errorf("line of %s = %d, want %d", toml.Key(c.key), got, c.line)
		}
	}
}

// The scanner sees only documents the TOML parser accepted, but must stop
// safely on anything.
func TestLocateKeysNeverHangs(t *testing.T) {
	for _, s := range []string{"", "[", "[[", "a", "a =", `a = "`, `a = """`, "a = [", "a = {", "a = {b", "= 1", "a.", `"a`, "[a]]", "a = 1 2 3", "\x00"} {
		LocateKeys(s)
		LocateKeys(strings.Repeat(s, 3))
	}
}
