package declaration

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/muster-tool/muster/internal/resource"
)

// want is one expected problem: where, which key, and words the message
// must contain.
type want struct {
	line    int
	key     string
	message string
	warning bool
}

const roleHead = "[role.r]\nnodes = [\"*\"]\n" // lines 1-2 of most cases

var validationCases = []struct {
	name  string
	toml  string
	files map[string]string // extra files beside site.toml
	want  []want
}{
	{"syntax error", roleHead + "[role.r.file.\"/etc/motd\"]\ncontent = \"unterminated\n", nil,
		[]want{{4, "", "syntax error", false}}},
	{"syntax error in a header", "[role.r\nnodes = [\"*\"]\n", nil,
		[]want{{1, "", "syntax error", false}}},
	{"redefined table", roleHead + "[role.r]\n", nil,
		[]want{{3, "", "syntax error", false}}},
	{"unknown top-level key", "prunes = true\n", nil,
		[]want{{1, "prunes", "unknown key (want prune, vars, role, node or rollout)", false}}},
	{"resource outside a role", "[file.\"/etc/motd\"]\ncontent = \"\"\n", nil,
		[]want{{1, "file", "belongs to a role or a node", false}}},
	{"unknown role key", roleHead + "colour = \"red\"\n", nil,
		[]want{{3, "role.r.colour", "unknown key", false}}},
	{"unknown resource type", roleHead + "[role.r.fil.\"/etc/motd\"]\ncontent = \"\"\n", nil,
		[]want{{3, "role.r.fil", `unknown resource type "fil"`, false}}},
	{"unknown resource key", roleHead + "[role.r.file.\"/etc/motd\"]\ncontent = \"\"\nowner_name = \"x\"\n", nil,
		[]want{{5, `role.r.file."/etc/motd".owner_name`, "unknown key for a file", false}}},
	{"path given as a key", roleHead + "[role.r.file.\"/etc/motd\"]\npath = \"/etc/motd\"\ncontent = \"\"\n", nil,
		[]want{{4, `role.r.file."/etc/motd".path`, "the table's own name is the path", false}}},
	{"mode as an integer", roleHead + "[role.r.file.\"/etc/motd\"]\ncontent = \"\"\nmode = 644\n", nil,
		[]want{{5, `role.r.file."/etc/motd".mode`, "must be a string of 3 or 4 octal digits", false}}},
	{"mode not octal", roleHead + "[role.r.file.\"/etc/motd\"]\ncontent = \"\"\nmode = \"0999\"\n", nil,
		[]want{{5, `role.r.file."/etc/motd".mode`, `"0999" is not a mode`, false}}},
	{"mode too short", roleHead + "[role.r.directory.\"/srv\"]\nmode = \"64\"\n", nil,
		[]want{{4, `role.r.directory."/srv".mode`, `"64" is not a mode`, false}}},
	{"mode too long", roleHead + "[role.r.directory.\"/srv\"]\nmode = \"00644\"\n", nil,
		[]want{{4, `role.r.directory."/srv".mode`, `"00644" is not a mode`, false}}},
	{"nodes not an array", "[role.r]\nnodes = \"web-*\"\n", nil,
		[]want{{2, "role.r.nodes", "must be an array of strings, not a string", false}}},
	{"nodes with a number", "[role.r]\nnodes = [\"web-*\", 1]\n", nil,
		[]want{{2, "role.r.nodes", "element 2 must be a string, not an integer", false}}},
	{"prune not a boolean", "prune = \"yes\"\n", nil,
		[]want{{1, "prune", "must be true or false, not a string", false}}},
	{"enabled not a boolean", roleHead + "[role.r.service.nginx]\nenabled = \"yes\"\n", nil,
		[]want{{4, "role.r.service.nginx.enabled", "must be true or false", false}}},
	{"order not an integer", roleHead + "[role.r.package.nginx]\norder = 1.5\n", nil,
		[]want{{4, "role.r.package.nginx.order", "must be an integer, not a float", false}}},
	{"content not a string", roleHead + "[role.r.file.\"/etc/motd\"]\ncontent = [\"a\"]\n", nil,
		[]want{{4, `role.r.file."/etc/motd".content`, "must be a string, not an array", false}}},
	{"relative path", roleHead + "[role.r.file.\"etc/motd\"]\ncontent = \"\"\n", nil,
		[]want{{3, `role.r.file."etc/motd"`, "is not absolute", false}}},
	{"path with ..", roleHead + "[role.r.file.\"/etc/../motd\"]\ncontent = \"\"\n", nil,
		[]want{{3, `role.r.file."/etc/../motd"`, "contains ..", false}}},
	{"unclean path", roleHead + "[role.r.file.\"/etc//motd\"]\ncontent = \"\"\n", nil,
		[]want{{3, `role.r.file."/etc//motd"`, `is not clean; write "/etc/motd"`, false}}},
	{"trailing slash", roleHead + "[role.r.directory.\"/srv/www/\"]\n", nil,
		[]want{{3, `role.r.directory."/srv/www/"`, "is not clean", false}}},
	{"root directory", roleHead + "[role.r.directory.\"/\"]\n", nil,
		[]want{{3, `role.r.directory."/"`, "is the root directory", false}}},
	{"content and source", roleHead + "[role.r.file.\"/etc/motd\"]\ncontent = \"hi\"\nsource = \"motd\"\n",
		map[string]string{"motd": "hi\n"},
		[]want{{5, `role.r.file."/etc/motd".source`, "content or source, not both", false}}},
	{"source missing", roleHead + "[role.r.file.\"/etc/motd\"]\nsource = \"files/motd\"\n", nil,
		[]want{{4, `role.r.file."/etc/motd".source`, `source file "files/motd" does not exist`, false}}},
	{"source is a directory", roleHead + "[role.r.file.\"/etc/motd\"]\nsource = \"files\"\n",
		map[string]string{"files/a": "a"},
		[]want{{4, `role.r.file."/etc/motd".source`, "is a directory", false}}},
	{"file without content", roleHead + "[role.r.file.\"/etc/motd\"]\nmode = \"0644\"\n", nil,
		[]want{{3, `role.r.file."/etc/motd"`, "needs content, source or a template", false}}},
	{"empty version", roleHead + "[role.r.package.nginx]\nversion = \"\"\n", nil,
		[]want{{4, "role.r.package.nginx.version", "is empty", false}}},
	{"malformed version", roleHead + "[role.r.package.nginx]\nversion = \"1.0 beta\"\n", nil,
		[]want{{4, "role.r.package.nginx.version", `"1.0 beta" is not a version`, false}}},
	{"package name like an option", roleHead + "[role.r.package.-oops]\n", nil,
		[]want{{3, "role.r.package.-oops", "is not a package name", false}}},
	{"symlink without target", roleHead + "[role.r.symlink.\"/usr/bin/vi\"]\n", nil,
		[]want{{3, `role.r.symlink."/usr/bin/vi"`, "needs a target", false}}},
	{"symlink with empty target", roleHead + "[role.r.symlink.\"/usr/bin/vi\"]\ntarget = \"\"\n", nil,
		[]want{{4, `role.r.symlink."/usr/bin/vi".target`, "is empty", false}}},
	{"restart_on relative", roleHead + "[role.r.service.nginx]\nrestart_on = [\"/etc/a.conf\", \"nginx.conf\"]\n", nil,
		[]want{{4, "role.r.service.nginx.restart_on", `entry "nginx.conf" is not absolute`, false}}},
	{"restart_on not an array", roleHead + "[role.r.service.nginx]\nrestart_on = \"/etc/a.conf\"\n", nil,
		[]want{{4, "role.r.service.nginx.restart_on", "must be an array of strings", false}}},
	{"unknown state", roleHead + "[role.r.directory.\"/srv\"]\nstate = \"gone\"\n", nil,
		[]want{{4, `role.r.directory."/srv".state`, `must be "present" or "absent", not "gone"`, false}}},
	{"role without selection", "[role.r]\n[role.r.package.nginx]\n", nil,
		[]want{{1, "role.r", "role selects no nodes", false}}},
	{"empty nodes", "[role.r]\nnodes = []\n", nil,
		[]want{{2, "role.r.nodes", "is empty", false}}},
	{"malformed pattern", "[role.r]\nnodes = [\"web-[\"]\n", nil,
		[]want{{2, "role.r.nodes", `pattern "web-[" is malformed`, false}}},
	{"label not a string", "[role.r]\nlabels = { env = \"prod\", tier = 1 }\n", nil,
		[]want{{2, "role.r.labels.tier", "must be a string, not an integer", false}}},
	{"node section with a pattern", "[node.\"web-*\".package.nginx]\n", nil,
		[]want{{1, `node."web-*"`, "names one node exactly", false}}},
	{"node section selecting", "[node.web-01]\nlabels = { env = \"prod\" }\n", nil,
		[]want{{2, "node.web-01.labels", "holds only resources", false}}},
	{"unknown type in a node section", "[node.web-01.pkg.nginx]\n", nil,
		[]want{{1, "node.web-01.pkg", `unknown resource type "pkg"`, false}}},
	{"role not a table", "role = \"web\"\n", nil,
		[]want{{1, "role", "must be a table of roles", false}}},
	{"resource not a table", roleHead + "[role.r.package]\nnginx = \"latest\"\n", nil,
		[]want{{4, "role.r.package.nginx", "must be a table of settings, not a string", false}}},
	{"resource type not a table", roleHead + "file = \"/etc/motd\"\n", nil,
		[]want{{3, "role.r.file", "must be a table of file resources", false}}},
	{"array of tables", roleHead + "[[role.r.file]]\ncontent = \"\"\n", nil,
		[]want{{3, "role.r.file", "not an array of tables", false}}},
	{"bad unit name", roleHead + "[role.r.service.\"a b\"]\n", nil,
		[]want{{3, `role.r.service."a b"`, `"a b" is not a systemd unit name`, false}}},
	{"bad owner", roleHead + "[role.r.directory.\"/srv\"]\nowner = \"ro ot\"\n", nil,
		[]want{{4, `role.r.directory."/srv".owner`, `"ro ot" is not a user or group`, false}}},
	{"one unit under two names", roleHead + "[role.r.service.nginx]\nenabled = true\n[role.r.service.\"nginx.service\"]\nenabled = false\n", nil,
		[]want{{5, `role.r.service."nginx.service"`, "service:nginx.service is also declared for role r at site.toml:3 with different settings", false}}},
	{"empty role name", "[role.\"\"]\nnodes = [\"*\"]\n", nil,
		[]want{{1, `role.""`, "role name is empty", false}}},
	{"settings of an absent file", roleHead + "[role.r.file.\"/etc/motd\"]\nstate = \"absent\"\ncontent = \"x\"\n", nil,
		[]want{{5, `role.r.file."/etc/motd".content`, "ignored: the file is declared absent", true}}},
	{"newline in a path", roleHead + "[role.r.file.\"/etc/mo\\ntd\"]\ncontent = \"\"\n", nil,
		[]want{{3, `role.r.file."/etc/mo\ntd"`, `path "/etc/mo\ntd" contains a control character`, false}}},
	{"escape in a directory path", roleHead + "[role.r.directory.\"/srv/\\u001b[2J\"]\n", nil,
		[]want{{3, `role.r.directory."/srv/\u001b[2J"`, `path "/srv/\x1b[2J" contains a control character`, false}}},
	{"tab in a symlink target", roleHead + "[role.r.symlink.\"/usr/bin/vi\"]\ntarget = \"vim\\t\"\n", nil,
		[]want{{4, `role.r.symlink."/usr/bin/vi".target`, `"vim\t" contains a control character`, false}}},
	{"newline in a restart_on entry", roleHead + "[role.r.service.nginx]\nrestart_on = [\"/etc/a\\nb\"]\n", nil,
		[]want{{4, "role.r.service.nginx.restart_on", `entry "/etc/a\nb" contains a control character`, false}}},
	{"newline in a unit name", roleHead + "[role.r.service.\"a\\nb\"]\n", nil,
		[]want{{3, `role.r.service."a\nb"`, `"a\nb" is not a systemd unit name: it contains a control character`, false}}},
	{"newline in a package name", roleHead + "[role.r.package.\"a\\nb\"]\n", nil,
		[]want{{3, `role.r.package."a\nb"`, `"a\nb" is not a package name`, false}}},
	{"control character in an owner", roleHead + "[role.r.directory.\"/srv\"]\nowner = \"ro\\u0007ot\"\n", nil,
		[]want{{4, `role.r.directory."/srv".owner`, `"ro\aot" is not a user or group`, false}}},
	{"newline in a role name", "[role.\"w\\neb\"]\nnodes = [\"*\"]\n", nil,
		[]want{{1, `role."w\neb"`, `role name "w\neb" contains a control character`, false}}},
	{"newline in a node name", "[node.\"web\\n01\".package.curl]\n", nil,
		[]want{{1, `node."web\n01"`, `node name "web\n01" contains a control character`, false}}},
	{"path longer than a name may be", roleHead + "[role.r.file.\"/etc/" + strings.Repeat("n", 256) + "\"]\ncontent = \"\"\n", nil,
		[]want{{3, `role.r.file."/etc/` + strings.Repeat("n", 256) + `"`, "has a name of 256 bytes; the system allows at most 255", false}}},
	{"setuid without special_bits", roleHead + "[role.r.file.\"/usr/local/bin/tool\"]\ncontent = \"\"\nmode = \"4755\"\n", nil,
		[]want{{5, `role.r.file."/usr/local/bin/tool".mode`, `"4755" sets the setuid bit; add special_bits = true to this resource to allow it`, false}}},
	{"sticky directory without special_bits", roleHead + "[role.r.directory.\"/srv/drop\"]\nmode = \"1777\"\nspecial_bits = false\n", nil,
		[]want{{4, `role.r.directory."/srv/drop".mode`, `"1777" sets the sticky bit`, false}}},
	{"special_bits not a boolean", roleHead + "[role.r.file.\"/usr/local/bin/tool\"]\ncontent = \"\"\nmode = \"4755\"\nspecial_bits = \"yes\"\n", nil,
		[]want{{5, `role.r.file."/usr/local/bin/tool".mode`, `"4755" sets the setuid bit`, false},
			{6, `role.r.file."/usr/local/bin/tool".special_bits`, "must be true or false, not a string", false}}},
	{"special_bits on a symlink", roleHead + "[role.r.symlink.\"/a\"]\ntarget = \"b\"\nspecial_bits = true\n", nil,
		[]want{{5, `role.r.symlink."/a".special_bits`, "unknown key for a symlink", false}}},
	{"replace_symlink not a boolean", roleHead + "[role.r.file.\"/etc/app.conf\"]\ncontent = \"\"\nreplace_symlink = 1\n", nil,
		[]want{{5, `role.r.file."/etc/app.conf".replace_symlink`, "must be true or false, not an integer", false}}},
	{"empty owner", roleHead + "[role.r.directory.\"/srv\"]\nowner = \"\"\n", nil,
		[]want{{4, `role.r.directory."/srv".owner`, "is empty", false}}},
	{"one path as a file and a directory", roleHead + "[role.r.file.\"/etc/app\"]\ncontent = \"\"\n[role.r.directory.\"/etc/app\"]\n", nil,
		[]want{{5, `role.r.directory."/etc/app"`, "/etc/app is declared as a directory here and as a file at site.toml:3; a path has one type", false}}},
	{"one path as a symlink and a file in a node section", "[node.web-01.symlink.\"/etc/app\"]\ntarget = \"x\"\n[node.web-01.file.\"/etc/app\"]\ncontent = \"\"\n", nil,
		[]want{{3, `node.web-01.file."/etc/app"`, "/etc/app is declared as a file here and as a symlink at site.toml:1; a path has one type", false}}},
	{"validate with shell syntax", roleHead + "[role.r.file.\"/etc/a\"]\ncontent = \"\"\nvalidate = \"sh -n %s && true\"\n", nil,
		[]want{{5, `role.r.file."/etc/a".validate`, `"sh -n %s && true" holds "&", which only a shell understands, and validate runs without one; write the command as an array of words`, false}}},
	{"validate without the file", roleHead + "[role.r.file.\"/etc/a\"]\ncontent = \"\"\nvalidate = [\"nginx\", \"-t\"]\n", nil,
		[]want{{5, `role.r.file."/etc/a".validate`, `"nginx -t" never names the new file; write %s where its path goes`, false}}},
	{"validate_shell with words", roleHead + "[role.r.file.\"/etc/a\"]\ncontent = \"\"\nvalidate = [\"sh\", \"%s\"]\nvalidate_shell = true\n", nil,
		[]want{{5, `role.r.file."/etc/a".validate`, "with validate_shell = true, must be one string for the shell, not an array", false}}},
	{"validate_shell alone", roleHead + "[role.r.file.\"/etc/a\"]\ncontent = \"\"\nvalidate_shell = true\n", nil,
		[]want{{5, `role.r.file."/etc/a".validate_shell`, "says how to run validate, which is not given", false}}},
	{"validate not words", roleHead + "[role.r.file.\"/etc/a\"]\ncontent = \"\"\nvalidate = 1\n", nil,
		[]want{{5, `role.r.file."/etc/a".validate`, "must be a string or an array of strings, not an integer", false}}},
	{"validate on an absent file", roleHead + "[role.r.file.\"/etc/a\"]\nstate = \"absent\"\nvalidate = \"sh -n %s\"\n", nil,
		[]want{{5, `role.r.file."/etc/a".validate`, "ignored: the file is declared absent", true}}},
	{"user name not portable", roleHead + "[role.r.user.Deploy]\n", nil,
		[]want{{3, "role.r.user.Deploy", `"Deploy" is not a user name: use lowercase letters`, false}}},
	{"uid not an integer", roleHead + "[role.r.user.deploy]\nuid = \"1000\"\n", nil,
		[]want{{4, "role.r.user.deploy.uid", "must be an integer, not a string", false}}},
	{"uid out of range", roleHead + "[role.r.user.deploy]\nuid = -5\n", nil,
		[]want{{4, "role.r.user.deploy.uid", "-5 is not an id between 0 and 4294967294", false}}},
	{"gid on a user", roleHead + "[role.r.user.deploy]\ngid = 5\n", nil,
		[]want{{4, "role.r.user.deploy.gid", "unknown key for a user (want uid, group, groups, home, shell, system, state, order)", false}}},
	{"empty groups", roleHead + "[role.r.user.deploy]\ngroups = []\n", nil,
		[]want{{4, "role.r.user.deploy.groups", "is empty; leave it out to leave the user's groups as they are", false}}},
	{"relative home", roleHead + "[role.r.user.deploy]\nhome = \"deploy\"\n", nil,
		[]want{{4, "role.r.user.deploy.home", `"deploy" is not absolute`, false}}},
	{"group with a shell", roleHead + "[role.r.group.web]\nshell = \"/bin/sh\"\n", nil,
		[]want{{4, "role.r.group.web.shell", "unknown key for a group (want gid, system, state, order)", false}}},
	{"settings of an absent user", roleHead + "[role.r.user.deploy]\nstate = \"absent\"\nuid = 1000\n", nil,
		[]want{{5, "role.r.user.deploy.uid", "ignored: the user is declared absent", true}}},
	{"tree without source", roleHead + "[role.r.tree.\"/srv/www\"]\nowner = \"www-data\"\n", nil,
		[]want{{3, `role.r.tree."/srv/www"`, `a tree needs source, the directory to copy, such as source = "site/"`, false}}},
	{"tree source missing", roleHead + "[role.r.tree.\"/srv/www\"]\nsource = \"site\"\n", nil,
		[]want{{4, `role.r.tree."/srv/www".source`, `source directory "site" does not exist`, false}}},
	{"tree source a file", roleHead + "[role.r.tree.\"/srv/www\"]\nsource = \"site\"\n", map[string]string{"site": "x"},
		[]want{{4, `role.r.tree."/srv/www".source`, `source "site" is not a directory; declare one file as a file resource`, false}}},
	{"tree file_mode bad", roleHead + "[role.r.tree.\"/srv/www\"]\nsource = \"site\"\nfile_mode = \"4755\"\n", map[string]string{"site/a": "x"},
		[]want{{5, `role.r.tree."/srv/www".file_mode`, `"4755" sets the setuid bit; add special_bits = true`, false}}},
	{"tree with mode", roleHead + "[role.r.tree.\"/srv/www\"]\nsource = \"site\"\nmode = \"0644\"\n", map[string]string{"site/a": "x"},
		[]want{{5, `role.r.tree."/srv/www".mode`, "unknown key for a tree (want source, file_mode, directory_mode, owner, group, special_bits, purge, order)", false}}},
	{"tree clashes with a file", roleHead + "[role.r.tree.\"/srv/www\"]\nsource = \"site\"\n[role.r.file.\"/srv/www/a\"]\ncontent = \"y\"\n", map[string]string{"site/a": "x"},
		[]want{{3, `role.r.tree."/srv/www"`, `file:/srv/www/a is also declared for role r at site.toml:5 with different settings`, false}}},
	{"inline resource table", roleHead + "[role.r.file]\n\"/etc/motd\" = { content = \"x\", mode = \"abc\" }\n", nil,
		[]want{{4, `role.r.file."/etc/motd".mode`, `"abc" is not a mode`, false}}},
}

func TestParseReportsEachKindOfProblem(t *testing.T) {
	for _, c := range validationCases {
		t.Run(c.name, func(t *testing.T) {
			files := map[string]string{"site.toml": c.toml}
			for k, v := range c.files {
				files[k] = v
			}
			d, problems := parseFiles(t, files)
			if len(problems) != len(c.want) {
				t.Fatalf("got %d problems, want %d:\n%s", len(problems), len(c.want), problemLines(problems))
			}
			errors := false
			for i, w := range c.want {
				p := problems[i]
				if p.File != "site.toml" || p.Line != w.line || p.Key != w.key ||
					!strings.Contains(p.Message, w.message) || p.Warning != w.warning {
					t.Errorf("problem %d = %+v\nwant site.toml:%d key %q message containing %q warning=%t",
						i, p, w.line, w.key, w.message, w.warning)
				}
				errors = errors || !w.warning
			}
			if errors != (d == nil) {
				t.Errorf("errors = %t but declaration nil = %t", errors, d == nil)
			}
		})
	}
}

func TestParseReportsEveryProblemTogether(t *testing.T) {
	_, problems := parseFiles(t, map[string]string{
		"b.toml": `[role.web]
nodes = ["web-*"]

[role.web.file."/etc/motd"]
content = "hello"
mode = "999"

[role.web.package.nginx]
version = ""

[role.web.service.nginx]
restart_on = ["nginx.conf"]
`,
		"a.toml": `[role.db]
labels = { tier = "db" }

[role.db.symlink."/usr/bin/pg"]

[role.db.frobnicator.x]
`,
	})
	got := problemLines(problems)
	wantLines := []string{
		`a.toml:4: role.db.symlink."/usr/bin/pg": a symlink needs a target`,
		`a.toml:6: role.db.frobnicator: unknown resource type "frobnicator"`,
		`b.toml:6: role.web.file."/etc/motd".mode: "999" is not a mode`,
		`b.toml:9: role.web.package.nginx.version: is empty`,
		`b.toml:12: role.web.service.nginx.restart_on: entry "nginx.conf" is not absolute`,
	}
	lines := strings.Split(strings.TrimSpace(got), "\n")
	if len(lines) != len(wantLines) {
		t.Fatalf("got:\n%s\nwant %d problems", got, len(wantLines))
	}
	for i, w := range wantLines {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("problem %d = %q, want it to start %q", i, lines[i], w)
		}
	}
}

func TestParseDuplicateResourcesAcrossFiles(t *testing.T) {
	a := `[node.web-01.file."/etc/motd"]
content = "a"
mode = "0644"
`
	t.Run("different", func(t *testing.T) {
		d, problems := parseFiles(t, map[string]string{
			"a.toml": a,
			"b.toml": "# override\n[node.web-01.file.\"/etc/motd\"]\ncontent = \"b\"\n",
		})
		if d != nil || len(problems) != 1 {
			t.Fatalf("want one error, got:\n%s", problemLines(problems))
		}
		p := problems[0]
		if p.File != "b.toml" || p.Line != 2 || p.Key != `node.web-01.file."/etc/motd"` ||
			!strings.Contains(p.Message, "file:/etc/motd is also declared for node web-01 at a.toml:1 with different settings") {
			t.Errorf("got %s", p)
		}
	})
	t.Run("identical", func(t *testing.T) {
		// "644" and "0644" are one mode, so these say the same thing.
		b := strings.Replace(a, `"0644"`, `"644"`, 1)
		d, problems := parseFiles(t, map[string]string{"a.toml": a, "b.toml": b})
		if d == nil || len(problems) != 0 {
			t.Fatalf("identical declarations must be fine, got:\n%s", problemLines(problems))
		}
	})
}

func TestParseRoleDefinedInTwoFiles(t *testing.T) {
	_, problems := parseFiles(t, map[string]string{
		"a.toml": "[role.web]\nnodes = [\"web-*\"]\n",
		"b.toml": "\n[role.web]\nlabels = { tier = \"web\" }\n",
	})
	if len(problems) != 1 || problems[0].File != "b.toml" || problems[0].Line != 2 ||
		!strings.Contains(problems[0].Message, "role web is already defined at a.toml:1") {
		t.Fatalf("got:\n%s", problemLines(problems))
	}
}

func TestParsePrune(t *testing.T) {
	cases := []struct {
		name  string
		files map[string]string
		prune bool
		err   string
	}{
		{"default", map[string]string{"a.toml": ""}, false, ""},
		{"set", map[string]string{"a.toml": "prune = true\n"}, true, ""},
		{"agreeing files", map[string]string{"a.toml": "prune = true\n", "b.toml": "prune = true\n"}, true, ""},
		{"disagreeing files", map[string]string{"a.toml": "prune = true\n", "b.toml": "\nprune = false\n"}, false,
			"b.toml:2: prune: prune = false contradicts prune = true at a.toml:1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, problems := parseFiles(t, c.files)
			if c.err != "" {
				if len(problems) != 1 || problems[0].String() != c.err {
					t.Fatalf("got:\n%s\nwant %s", problemLines(problems), c.err)
				}
				return
			}
			if d == nil || len(problems) > 0 {
				t.Fatalf("got:\n%s", problemLines(problems))
			}
			if d.Prune() != c.prune {
				t.Errorf("Prune() = %t, want %t", d.Prune(), c.prune)
			}
		})
	}
}

// What a host receives is normalised, so that equal intent compares equal
// and the host gets one spelling of each thing.
func TestParseProducesSpecs(t *testing.T) {
	d := mustParse(t, map[string]string{
		"site.toml": `[role.r]
nodes = ["*"]
[role.r.file."/etc/motd"]
source = "files/motd"
mode = "644"
owner = "root"
secret = true
order = -5
[role.r.file."/etc/issue"]
content = ""
[role.r.directory."/srv/www"]
replace_symlink = true
[role.r.file."/usr/local/bin/tool"]
content = "#!/bin/sh\n"
mode = "4755"
special_bits = true
[role.r.symlink."/usr/bin/vi"]
target = "vim.basic"
[role.r.package.nginx]
[role.r.package.curl]
version = "7.88.1-10+deb12u5"
[role.r.service.nginx]
running = false
restart_on = ["/etc/nginx/nginx.conf"]
[role.r.service."backup.timer"]
enabled = true
`,
		"files/motd": "hello\n",
	})
	resolved, _, _ := d.Resolve([]Node{{Name: "n1"}})
	got := map[string]resource.Spec{}
	for _, s := range resolved[0].Resources {
		got[s.ID()] = s
	}
	f, tr := false, true
	want := map[string]resource.Spec{
		"file:/etc/motd":           {Kind: resource.File, Path: "/etc/motd", State: "present", Content: "hello\n", Secret: true, Mode: "0644", Owner: "root", Order: -5},
		"file:/etc/issue":          {Kind: resource.File, Path: "/etc/issue", State: "present"},
		"directory:/srv/www":       {Kind: resource.Directory, Path: "/srv/www", State: "present", ReplaceSymlink: true},
		"file:/usr/local/bin/tool": {Kind: resource.File, Path: "/usr/local/bin/tool", State: "present", Content: "#!/bin/sh\n", Mode: "4755", SpecialBits: true},
		"symlink:/usr/bin/vi":      {Kind: resource.Symlink, Path: "/usr/bin/vi", State: "present", Target: "vim.basic"},
		"package:nginx":            {Kind: resource.Package, Name: "nginx", Version: "present"},
		"package:curl":             {Kind: resource.Package, Name: "curl", Version: "7.88.1-10+deb12u5"},
		"service:nginx.service":    {Kind: resource.Service, Name: "nginx.service", Running: &f, RestartOn: []string{"/etc/nginx/nginx.conf"}},
		"service:backup.timer":     {Kind: resource.Service, Name: "backup.timer", Enabled: &tr},
	}
	if len(got) != len(want) {
		t.Errorf("got %d resources, want %d", len(got), len(want))
	}
	for id, w := range want {
		if g, ok := got[id]; !ok || !sameSpec(g, w) {
			t.Errorf("%s = %s, want %s", id, Summary(g), Summary(w))
		}
	}
	ids := []string{}
	for _, s := range resolved[0].Resources {
		ids = append(ids, s.ID())
	}
	for i := 1; i < len(ids); i++ {
		if ids[i-1] >= ids[i] {
			t.Errorf("resources not sorted by ID: %v", ids)
		}
	}
}

// A source file named by many resources is read once and its content is
// held once.
func TestParseSharesSourceContent(t *testing.T) {
	d := mustParse(t, map[string]string{
		"site.toml": `[role.a]
nodes = ["*"]
[role.a.file."/etc/a"]
source = "big"
[role.b]
nodes = ["*"]
[role.b.file."/etc/b"]
source = "./big"
`,
		"big": strings.Repeat("x", 1<<16),
	})
	resolved, _, _ := d.Resolve([]Node{{Name: "n"}})
	rs := resolved[0].Resources
	if len(rs) != 2 || unsafe.StringData(rs[0].Content) != unsafe.StringData(rs[1].Content) {
		t.Fatal("the two resources do not share one copy of the source content")
	}
}

// A syntax error inside a secret must not echo the secret back: the TOML
// library quotes a string up to a bad escape.
func TestProblemsNeverQuoteContent(t *testing.T) {
	const secret = "hunter2-correct-horse"
	cases := []string{
		roleHead + "[role.r.file.\"/etc/token\"]\nsecret = true\ncontent = \"" + secret + `\uZZZZ"` + "\n",
		roleHead + "[role.r.file.\"/etc/token\"]\nsecret = true\ncontent = \"" + secret + `\xZ"` + "\n",
		roleHead + "[role.r.file.\"/etc/token\"]\nsecret = true\ncontent = \"" + secret + "\"\nsource = \"token\"\nmode = 7\nbogus = \"" + secret + "\"\n",
		roleHead + "[role.r.file.\"/etc/token\"]\ncontent = " + secret + "\n",
	}
	for i, c := range cases {
		_, problems := parseFiles(t, map[string]string{"site.toml": c})
		if len(problems) == 0 {
			t.Errorf("case %d: no problem reported", i)
		}
		for _, p := range problems {
			if strings.Contains(p.String(), "hunter2") {
				t.Errorf("case %d: problem quotes content: %s", i, p)
			}
		}
	}
}

func TestProblemString(t *testing.T) {
	cases := []struct {
		p    Problem
		want string
	}{
		{Problem{File: "site.toml", Line: 3, Key: "role.web", Message: "bad"}, "site.toml:3: role.web: bad"},
		{Problem{File: "site.toml", Key: "role.web", Message: "bad"}, "site.toml: role.web: bad"},
		{Problem{File: "site.toml", Line: 3, Message: "bad"}, "site.toml:3: bad"},
		{Problem{Key: "role.web", Message: "bad"}, "role.web: bad"},
		{Problem{Message: "bad"}, "bad"},
	}
	for _, c := range cases {
		if got := c.p.String(); got != c.want {
			t.Errorf("String() = %q, want %q", got, c.want)
		}
	}
}

func TestHasErrors(t *testing.T) {
	if HasErrors(nil) || HasErrors([]Problem{{Message: "w", Warning: true}}) {
		t.Error("warnings alone are not errors")
	}
	if !HasErrors([]Problem{{Message: "w", Warning: true}, {Message: "e"}}) {
		t.Error("an error among warnings was missed")
	}
}
