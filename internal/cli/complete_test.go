package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// A flag name is a switch in every command or takes a value in every
// command: the completions skip the word after a flag that takes one,
// without knowing the command yet.
func TestFlagKindsAgree(t *testing.T) {
	kind := map[string]string{}
	for _, c := range completeTable() {
		for _, f := range c.flags {
			k := "switch"
			if f.Type != "bool" {
				k = "value"
			}
			if prev, ok := kind[f.Name]; ok && prev != k {
				t.Errorf("--%s is a %s in one command and a %s in muster %s", f.Name, prev, k, c.path)
			}
			kind[f.Name] = k
		}
	}
}

// What the completions offer for arguments comes from the usage lines.
func TestArgKinds(t *testing.T) {
	want := map[string]string{"report": "node", "brief show": "node", "enrol revoke": "node", "enrol cancel": "node",
		"declare": "file", "spool sync": "dir", "spool repo add": "deb", "help": "command",
		"apply": "", "enrol join": "", "enrol list": "", "init": ""}
	for _, c := range completeTable() {
		if w, ok := want[c.path]; ok {
			if c.args != w {
				t.Errorf("muster %s: arguments %q, want %q", c.path, c.args, w)
			}
			delete(want, c.path)
		}
	}
	for p := range want {
		t.Errorf("no command %q", p)
	}
}

// Every word the completions offer for a flag is one the command takes,
// and a word it does not take is a usage error: the mesh named does not
// exist, so a word taken fails later, with status 1.
func TestFlagChoicesAccepted(t *testing.T) {
	nowhere := filepath.Join(t.TempDir(), "none")
	n := 0
	for _, c := range completeTable() {
		for _, f := range c.flags {
			if len(f.Choices) == 0 {
				continue
			}
			for _, choice := range append(f.Choices, "no-such-word") {
				args := append(strings.Fields(c.path), "--"+f.Name, choice, "--mesh", nowhere)
				code, _, errs := runMuster(t, args...)
				if (code == ExitUsage) != (choice == "no-such-word") {
					t.Errorf("muster %s: exit %d: %s", strings.Join(args, " "), code, errs)
				}
				n++
			}
		}
	}
	if n < 8 {
		t.Errorf("only %d choices checked", n)
	}
}
