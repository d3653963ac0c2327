package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/muster-tool/muster/internal/brief"
	"github.com/muster-tool/muster/internal/fleet"
	"github.com/muster-tool/muster/internal/testutil/aptrepo"
	"github.com/muster-tool/muster/internal/testutil/jsonshape"
)

// jsonForms is every JSON document muster prints: the command (with the
// flag that changes the document), the version it carries and the type it
// is written from (nil: checked in its own package, internal/fleet).
var jsonForms = []struct {
	cmd     string
	version int
	doc     any
}{
	{"report", fleet.JSONVersion, nil},
	{"report --history", fleet.HistoryJSONVersion, nil},
	{"enrol list", listJSONVersion, listJSON{}},
	{"brief", brief.FormatVersion, briefingJSON{}},
	{"brief show", brief.FormatVersion, briefingJSON{}},
	{"brief list", briefListJSONVersion, briefListJSON{}},
	{"declare", declareJSONVersion, declareJSON{}},
	{"declare --check", declareJSONVersion, checkJSON{}},
	{"apply", applyJSONVersion, applyJSON{}},
	{"spool sync", spoolJSONVersion, syncJSON{}},
	{"spool verify", spoolJSONVersion, verifyJSON{}},
	{"spool repo add", repoAddJSONVersion, repoAddJSON{}},
	{"spool repo list", repoListJSONVersion, repoListJSON{}},
}

// TestJSONFormsDocumented: every command with --json is in jsonForms, and
// its man page documents its document with the version it carries.
func TestJSONFormsDocumented(t *testing.T) {
	listed := map[string]bool{}
	for _, f := range jsonForms {
		path, _, _ := strings.Cut(f.cmd, " --")
		listed[path] = true
		page := "muster-" + strings.SplitN(path, " ", 2)[0] + ".1"
		data, err := os.ReadFile(filepath.Join("..", "..", "man", page))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), fmt.Sprintf(`"version": %d`, f.version)) {
			t.Errorf("man/%s does not document the JSON of muster %s, version %d", page, f.cmd, f.version)
		}
	}
	for _, c := range leaves() {
		for _, fl := range c.flags() {
			if fl.Name == "json" && !listed[c.Path()] {
				t.Errorf("muster %s --json is not in jsonForms: document it and test that it parses", c.Path())
			}
		}
	}
}

// muster runs muster in dir with stdin and returns its exit status and
// output.
func musterIn(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(context.Background(), args, Stdio{In: strings.NewReader(stdin), Out: &out, Err: &errb})
	return code, out.String(), errb.String()
}

// TestEveryJSONFormParses makes every JSON document muster prints, on a
// real mesh and host, and parses it by the rules of internal/jsondoc
// against the type it is written from.
func TestEveryJSONFormParses(t *testing.T) {
	t.Setenv("MUSTER_SPOOL", "")
	dir := t.TempDir()
	sp, mesh, root := filepath.Join(dir, "spool"), filepath.Join(dir, "mesh"), filepath.Join(dir, "root")
	for _, d := range []string{sp, filepath.Join(dir, "copy"), filepath.Join(root, "var/lib/dpkg")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "var/lib/dpkg/status"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	site, bad := filepath.Join(dir, "site.toml"), filepath.Join(dir, "bad.toml")
	os.WriteFile(site, []byte("[role.web]\nnodes = [\"*\"]\n[role.web.file.\"/etc/motd\"]\ncontent = \"hello\\n\"\n"), 0o644)
	os.WriteFile(bad, []byte("[role.web]\nnodes = [\"*\"]\n[role.web.file.\"/etc/motd\"]\ncontent = \"x\"\nmode = \"0999\"\n"), 0o644)
	t.Setenv("MUSTER_MESH", mesh)
	host := []string{"--config", filepath.Join(dir, "host.toml"), "--state", filepath.Join(dir, "state"), "--root", root}

	must := func(want int, stdin string, args ...string) string {
		t.Helper()
		code, out, errs := musterIn(t, stdin, args...)
		if code != want {
			t.Fatalf("muster %s: exit %d, want %d\n%s%s", strings.Join(args, " "), code, want, out, errs)
		}
		return out
	}
	must(0, "", "init", "--spool", sp)
	token := must(0, "", "enrol", "issue", "web-1", "--label", "role=web")
	must(0, token, append([]string{"enrol", "join", "--spool", sp}, host...)...)

	docs := map[string]string{}
	docs["brief"] = must(0, "", append([]string{"brief", "--json"}, host...)...)
	docs["declare --check"] = must(1, "", "declare", "--check", "--json", bad)
	docs["declare"] = must(0, "", "declare", "--json", site) // admits web-1
	docs["brief list"] = must(0, "", "brief", "list", "--json")
	docs["enrol list"] = must(0, "", "enrol", "list", "--json")
	docs["brief show"] = must(0, "", "brief", "show", "web-1", "--json")
	docs["apply"] = must(0, "", append([]string{"apply", "--json"}, host...)...)
	docs["report"] = must(0, "", "report", "--json")
	docs["report --history"] = must(0, "", "report", "--history", "--json")
	docs["spool verify"] = must(0, "", "spool", "verify", "--json", "--spool", sp)
	docs["spool sync"] = must(0, "", "spool", "sync", "--json", sp, filepath.Join(dir, "copy"))
	if os.Geteuid() == 0 {
		repo := aptrepo.Build(t, filepath.Join(dir, "repo"), []aptrepo.Pkg{{Name: "muster-json-test", Version: "1.0-1"}})
		docs["spool repo add"] = must(0, "", "spool", "repo", "add", "--json", repo.DebPath(aptrepo.Pkg{Name: "muster-json-test", Version: "1.0-1"}))
		docs["spool repo list"] = must(0, "", "spool", "repo", "list", "--json")
		var list repoListJSON
		json.Unmarshal([]byte(docs["spool repo list"]), &list)
		if list.Index != 1 || len(list.Packages) != 1 || list.Packages[0].Name != "muster-json-test" || list.Packages[0].Version != "1.0-1" || list.Packages[0].Arch != "all" {
			t.Errorf("spool repo list --json: %+v", list)
		}
	}

	for _, f := range jsonForms {
		data, ok := docs[f.cmd]
		if !ok {
			t.Logf("muster %s --json not made here (needs root)", f.cmd)
			continue
		}
		var head struct{ Version int }
		if err := json.Unmarshal([]byte(data), &head); err != nil || head.Version != f.version {
			t.Errorf("muster %s --json: version %d (%v), want %d:\n%s", f.cmd, head.Version, err, f.version, data)
		}
		if f.doc == nil {
			continue
		}
		for _, p := range jsonshape.Check([]byte(data), f.doc) {
			t.Errorf("muster %s --json: %s\n%s", f.cmd, p, data)
		}
	}

	// What the documents say, as a consumer reads them.
	var list listJSON
	json.Unmarshal([]byte(docs["enrol list"]), &list)
	if len(list.Nodes) != 1 || list.Nodes[0].Labels["role"] != "web" || list.Nodes[0].Revoked == nil {
		t.Errorf("enrol list --json: %+v", list)
	}
	var check checkJSON
	json.Unmarshal([]byte(docs["declare --check"]), &check)
	if check.Valid || len(check.Problems) != 1 || check.Problems[0].File != bad || check.Problems[0].Line != 5 || check.Problems[0].Warning {
		t.Errorf("declare --check --json of a bad file: %+v", check)
	}
	var app applyJSON
	json.Unmarshal([]byte(docs["apply"]), &app)
	if app.Node != "web-1" || app.Generation == nil || *app.Generation != 1 || app.Outcome != "passed" || app.Counts.Changed != 1 ||
		len(app.Lines) != 1 || app.Lines[0].ID != "file:/etc/motd" || !app.Sent {
		t.Errorf("apply --json: %+v", app)
	}
	// A report's seq is the clock in nanoseconds, past 2^53: a string
	// that reads back exactly.
	m := regexp.MustCompile(`"seq": "([0-9]+)"`).FindStringSubmatch(docs["report"])
	if m == nil {
		t.Fatalf("report --json: no seq as a string:\n%s", docs["report"])
	}
	if n, err := strconv.ParseUint(m[1], 10, 64); err != nil || n <= 1<<53 {
		t.Errorf("report --json: seq %s, want a number past 2^53", m[1])
	}
}
