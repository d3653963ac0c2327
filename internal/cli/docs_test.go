package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// leaves returns every runnable command.
func leaves() []*Command {
	var out []*Command
	var walk func(cs []*Command)
	walk = func(cs []*Command) {
		for _, c := range cs {
			if c.runnable() {
				out = append(out, c)
			}
			walk(c.Sub)
		}
	}
	walk(commands())
	return out
}

// flagsOf builds a command's flag set; a flag defined twice panics in pflag,
// which the test reports.
func flagsOf(t *testing.T, c *Command) (names []string) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("muster %s: defining flags: %v", c.Path(), r)
		}
	}()
	for _, f := range c.flags() {
		if f.Name != "help" {
			names = append(names, f.Name)
		}
	}
	return names
}

// TestEveryCommandRunsOrHasSubcommands: a command in the table that
// neither runs nor has subcommands would fail only when someone typed it.
func TestEveryCommandRunsOrHasSubcommands(t *testing.T) {
	var walk func(cs []*Command)
	walk = func(cs []*Command) {
		for _, c := range cs {
			if !c.runnable() && len(c.Sub) == 0 {
				t.Errorf("muster %s: neither runs nor has subcommands", c.Path())
			}
			walk(c.Sub)
		}
	}
	walk(commands())
}

func TestEveryCommandIsDocumented(t *testing.T) {
	for _, c := range leaves() {
		if c.Short == "" || c.Usage == "" || c.Long == "" || c.Examples == "" {
			t.Errorf("muster %s: short help, usage, long help and examples are all required", c.Path())
		}
		if !strings.HasPrefix(c.Usage, "muster "+c.Path()) {
			t.Errorf("muster %s: usage %q does not start with the command", c.Path(), c.Usage)
		}
		if strings.HasSuffix(c.Short, ".") || strings.ToLower(c.Short[:1]) != c.Short[:1] {
			t.Errorf("muster %s: short help %q: lowercase, no trailing period", c.Path(), c.Short)
		}
		flagsOf(t, c)
	}
}

// TestFlagsSayWhatTheyTake: the table tells help, and the shell
// completions, what each flag takes: a file, a directory, a spool, a
// number, a duration, or nothing for a switch.
func TestFlagsSayWhatTheyTake(t *testing.T) {
	want := map[string]map[string]string{
		"apply": {"config": "FILE string", "state": "DIR string", "spool": "SPOOL string",
			"root": "DIR string", "dry-run": " bool", "timeout": "DURATION duration", "help": " bool"},
		"report":      {"mesh": "DIR string", "generation": "N uint", "table": " bool", "json": " bool", "sort": "KEY string"},
		"brief":       {"json": " bool", "toml": " bool"},
		"enrol issue": {"label": "KEY=VALUE stringArray", "expires": "DURATION duration"},
		"enrol join":  {"token-file": "FILE string", "force": " bool"},
		"spool sync":  {"workers": "N int", "json": " bool"},
	}
	for _, c := range leaves() {
		for _, f := range c.flags() {
			if (f.Type == "bool") != (f.Value == "") {
				t.Errorf("muster %s --%s: type %s, value %q: a switch takes no value, every other flag names one", c.Path(), f.Name, f.Type, f.Value)
			}
			if w, ok := want[c.Path()][f.Name]; ok {
				if got := f.Value + " " + f.Type; got != w {
					t.Errorf("muster %s --%s takes %q, want %q", c.Path(), f.Name, got, w)
				}
				delete(want[c.Path()], f.Name)
			}
		}
	}
	for cmd, flags := range want {
		for f := range flags {
			t.Errorf("muster %s has no flag --%s", cmd, f)
		}
	}
}

var manFlag = regexp.MustCompile(`Fl \\-([a-z][a-z0-9-]*)`)

// TestManPagesMatchFlags fails when a flag exists in code but not in its man
// page's OPTIONS section, or the reverse.
func TestManPagesMatchFlags(t *testing.T) {
	pages := map[string][]*Command{}
	for _, c := range leaves() {
		page := "muster-" + strings.SplitN(c.Path(), " ", 2)[0] + ".1"
		pages[page] = append(pages[page], c)
	}
	for page, cmds := range pages {
		data, err := os.ReadFile(filepath.Join("..", "..", "man", page))
		if err != nil {
			t.Errorf("%s: %v (every command needs a man page)", page, err)
			continue
		}
		options := section(string(data), "OPTIONS")
		inMan := map[string]bool{}
		for _, m := range manFlag.FindAllStringSubmatch(options, -1) {
			inMan[m[1]] = true
		}
		inCode := map[string]bool{}
		for _, c := range cmds {
			for _, f := range flagsOf(t, c) {
				inCode[f] = true
			}
		}
		for f := range inCode {
			if !inMan[f] {
				t.Errorf("man/%s: flag --%s exists in code but not in the OPTIONS section", page, f)
			}
		}
		for f := range inMan {
			if !inCode[f] && f != "help" {
				t.Errorf("man/%s: OPTIONS documents --%s, which no command of that page has", page, f)
			}
		}
	}
}

// section returns the text of one .Sh section of an mdoc page.
func section(page, name string) string {
	_, after, ok := strings.Cut(page, "\n.Sh "+name+"\n")
	if !ok {
		return ""
	}
	if i := strings.Index(after, "\n.Sh "); i >= 0 {
		after = after[:i]
	}
	return after
}

// TestExitStatusTableMatchesManPage keeps muster(1)'s EXIT STATUS section
// and the exit status table in exit.go in step.
func TestExitStatusTableMatchesManPage(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "man", "muster.1"))
	if err != nil {
		t.Fatal(err)
	}
	sec := section(string(data), "EXIT STATUS")
	var inMan []string
	for _, l := range strings.Split(sec, "\n") {
		if code, ok := strings.CutPrefix(l, ".It "); ok {
			inMan = append(inMan, code)
		}
	}
	var inCode []string
	for _, e := range exitStatus {
		inCode = append(inCode, fmt.Sprint(e.Code))
	}
	sort.Strings(inMan)
	if strings.Join(inMan, ",") != strings.Join(inCode, ",") {
		t.Errorf("muster(1) EXIT STATUS lists %v, exit.go has %v", inMan, inCode)
	}
}

// TestEveryCommandIsListedInMusterPage keeps muster(1)'s COMMANDS section
// complete.
func TestEveryCommandIsListedInMusterPage(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "man", "muster.1"))
	if err != nil {
		t.Fatal(err)
	}
	sec := section(string(data), "COMMANDS")
	for _, c := range leaves() {
		if !strings.Contains(sec, ".It Ic "+c.Path()+"\n") {
			t.Errorf("muster(1) COMMANDS does not list %q", c.Path())
		}
	}
}

// apply and brief take the spool and the state directory from the host
// config; their help must not promise the environment or a built-in
// default that the config overrides.
func TestHostConfigFlagsHelp(t *testing.T) {
	for _, c := range leaves() {
		if c.Path() != "apply" && c.Path() != "brief" {
			continue
		}
		var b strings.Builder
		printHelp(&b, c)
		// An option's description continued on the next lines is one
		// line here.
		help := regexp.MustCompile(`\n {10,}`).ReplaceAllString(b.String(), " ")
		for _, bad := range []string{"(env MUSTER_SPOOL)", "(default " + DefaultState + ")"} {
			if strings.Contains(help, bad) {
				t.Errorf("muster %s --help says %q, but the host config wins", c.Path(), bad)
			}
		}
		for _, flag := range []string{"--spool SPOOL", "--state DIR"} {
			re := regexp.MustCompile(regexp.QuoteMeta(flag) + ` +.*instead of the host config's\n`)
			if !re.MatchString(help) {
				t.Errorf("muster %s --help: %s does not say it overrides the host config:\n%s", c.Path(), flag, help)
			}
		}
	}
}

// TestSeeAlsoAndReferences: muster(1) names every other page under SEE
// ALSO, and every page a page refers to exists.
func TestSeeAlsoAndReferences(t *testing.T) {
	pages, err := filepath.Glob(filepath.Join("..", "..", "man", "muster*.[1-9]"))
	if err != nil || len(pages) == 0 {
		t.Fatal("no man pages", err)
	}
	exists := map[string]bool{}
	for _, p := range pages {
		exists[filepath.Base(p)] = true
	}
	xr := regexp.MustCompile(`\.Xr (muster[a-z0-9-]*) ([1-9])`)
	for _, p := range pages {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range xr.FindAllStringSubmatch(string(data), -1) {
			if !exists[m[1]+"."+m[2]] {
				t.Errorf("man/%s refers to %s(%s), which is not in man/", filepath.Base(p), m[1], m[2])
			}
		}
		if filepath.Base(p) == "muster.1" {
			see := map[string]bool{}
			for _, m := range xr.FindAllStringSubmatch(section(string(data), "SEE ALSO"), -1) {
				see[m[1]+"."+m[2]] = true
			}
			for page := range exists {
				if page != "muster.1" && !see[page] {
					t.Errorf("muster(1) SEE ALSO does not name %s", page)
				}
			}
		}
	}
}

// TestExamplesRun: every muster command line in a man page's literal
// blocks, in a command's help examples and in the README names a command that exists and
// flags that command has, so an example a reader copies does not fail on
// its first word.
func TestExamplesRun(t *testing.T) {
	type example struct{ where, line string }
	var examples []example
	for _, c := range leaves() {
		// A command continued on the next line is one example.
		for _, l := range strings.Split(strings.ReplaceAll(c.Examples, "\\\n", ""), "\n") {
			examples = append(examples, example{"muster " + c.Path() + " --help", l})
		}
	}
	pages, _ := filepath.Glob(filepath.Join("..", "..", "man", "muster*.[1-9]"))
	for _, p := range pages {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		literal := false
		for _, l := range strings.Split(string(data), "\n") {
			switch {
			case strings.HasPrefix(l, ".Bd -literal"):
				literal = true
			case strings.HasPrefix(l, ".Ed"):
				literal = false
			case strings.HasPrefix(l, ".Dl "):
				examples = append(examples, example{"man/" + filepath.Base(p), strings.TrimPrefix(l, ".Dl ")})
			case literal:
				examples = append(examples, example{"man/" + filepath.Base(p), l})
			}
		}
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	fenced := false
	for _, l := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(l, "```") {
			fenced = !fenced
		} else if fenced {
			examples = append(examples, example{"README.md", strings.TrimPrefix(strings.TrimSpace(l), "$ ")})
		}
	}
	root := rootFlagSet(&Globals{})
	run := regexp.MustCompile(`(?:^|[|;&]\s*|\$\(\s*)(?:/usr/bin/)?muster ((?:[^|;&<>)]*))`)
	checked := 0
	for _, ex := range examples {
		for _, m := range run.FindAllStringSubmatch(strings.ReplaceAll(ex.line, `\-`, "-"), -1) {
			words := strings.Fields(m[1])
			for len(words) > 0 && strings.HasPrefix(words[0], "--") {
				// Global flags before the command.
				name, _, hasValue := strings.Cut(strings.TrimPrefix(words[0], "--"), "=")
				f := root.Lookup(name)
				if f == nil {
					t.Errorf("%s: %q: muster has no flag --%s before the command", ex.where, ex.line, name)
					break
				}
				words = words[1:]
				if !hasValue && f.Value.Type() != "bool" && len(words) > 0 {
					words = words[1:]
				}
			}
			if len(words) == 0 || strings.ToUpper(words[0]) == words[0] {
				continue // muster alone, or muster COMMAND in prose
			}
			cmd := findCommand(commands(), words[0])
			if cmd == nil {
				t.Errorf("%s: %q: no command %q", ex.where, ex.line, words[0])
				continue
			}
			words = words[1:]
			for len(cmd.Sub) > 0 && len(words) > 0 {
				sub := findCommand(cmd.Sub, words[0])
				if sub == nil {
					break
				}
				cmd, words = sub, words[1:]
			}
			fs := cmd.flagSet(&Globals{})
			for _, w := range words {
				if !strings.HasPrefix(w, "--") || w == "--" {
					continue
				}
				name, _, _ := strings.Cut(strings.TrimPrefix(w, "--"), "=")
				if fs.Lookup(name) == nil {
					t.Errorf("%s: %q: muster %s has no flag --%s", ex.where, ex.line, cmd.Path(), name)
				}
			}
			checked++
		}
	}
	t.Logf("%d examples checked", checked)
	if checked < 20 {
		t.Errorf("only %d examples checked: the test lost track of them", checked)
	}
}

// TestHelpFitsATerminal: every line of muster --help and of every
// command's help fits a terminal of 80 columns and ends in no space, so
// nothing wraps mid-word on an operator's screen.
func TestHelpFitsATerminal(t *testing.T) {
	check := func(what string, print func(w *strings.Builder)) {
		var b strings.Builder
		print(&b)
		for i, l := range strings.Split(b.String(), "\n") {
			if n := len([]rune(l)); n > helpWidth {
				t.Errorf("%s, line %d: %d columns, more than %d: %q", what, i+1, n, helpWidth, l)
			}
			if strings.TrimRight(l, " ") != l {
				t.Errorf("%s, line %d: ends in a space: %q", what, i+1, l)
			}
		}
	}
	check("muster --help", func(w *strings.Builder) { printOverview(w, commands()) })
	var walk func(cs []*Command)
	walk = func(cs []*Command) {
		for _, c := range cs {
			check("muster "+c.Path()+" --help", func(w *strings.Builder) { printHelp(w, c) })
			walk(c.Sub)
		}
	}
	walk(commands())
}
