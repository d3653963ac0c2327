package declaration

import (
	"strings"
	"testing"
)

const waves = roleHead + `
[rollout.wave.canary]
nodes = ["web-01"]

[rollout.wave.europe]
nodes = ["web-*"]
labels = { region = "eu" }
`

func TestWaveSelectsAsARoleDoes(t *testing.T) {
	d := mustParse(t, map[string]string{"site.toml": waves})
	if got := strings.Join(d.Waves(), " "); got != "canary europe" {
		t.Errorf("Waves() = %q", got)
	}
	nodes := []Node{
		{Name: "web-01"},
		{Name: "web-02", Labels: map[string]string{"region": "eu"}},
		{Name: "web-03", Labels: map[string]string{"region": "us"}},
		{Name: "db-01", Labels: map[string]string{"region": "eu"}},
	}
	for _, c := range []struct {
		names, patterns []string
		want            string // the nodes selected
		desc            string
	}{
		{[]string{"canary"}, nil, "web-01", "canary"},
		{[]string{"europe"}, nil, "web-02", "europe"},
		{[]string{"canary", "europe", "canary"}, nil, "web-01 web-02", "canary, europe"},
		{nil, []string{"db-*"}, "db-01", "db-*"},
		{[]string{"canary"}, []string{"web-0[3]"}, "web-01 web-03", "canary, web-0[3]"},
	} {
		w, err := d.Wave(c.names, c.patterns)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, n := range nodes {
			if w.Selects(n) {
				got = append(got, n.Name)
			}
		}
		if strings.Join(got, " ") != c.want || w.String() != c.desc {
			t.Errorf("Wave(%q, %q) selects %q, described %q; want %q, %q", c.names, c.patterns, got, w.String(), c.want, c.desc)
		}
	}
	if w, err := d.Wave(nil, nil); w != nil || err != nil {
		t.Errorf("no wave and no pattern: %v, %v; want the whole fleet (nil)", w, err)
	}
}

func TestWaveRefusesWhatTheDeclarationLacks(t *testing.T) {
	d := mustParse(t, map[string]string{"site.toml": waves})
	for _, c := range []struct {
		names, patterns []string
		want            string
	}{
		{[]string{"canery"}, nil, `wave "canery": the declaration has none of that name (it has canary, europe)`},
		{nil, []string{"web-["}, `node pattern "web-[" is malformed`},
		{nil, []string{""}, "empty node pattern"},
	} {
		if _, err := d.Wave(c.names, c.patterns); err == nil || err.Error() != c.want {
			t.Errorf("Wave(%q, %q) = %v, want %q", c.names, c.patterns, err, c.want)
		}
	}
	plain := mustParse(t, map[string]string{"site.toml": roleHead})
	if _, err := plain.Wave([]string{"canary"}, nil); err == nil || !strings.Contains(err.Error(), "has no waves (define them as [rollout.wave.NAME])") {
		t.Errorf("a wave of a declaration without waves: %v", err)
	}
}

func TestRolloutProblems(t *testing.T) {
	for _, c := range []struct {
		name, toml string
		want       want
	}{
		{"wave without selection", roleHead + "[rollout.wave.canary]\n", want{3, "rollout.wave.canary", "wave selects no nodes", false}},
		{"wave with a resource", roleHead + "[rollout.wave.canary]\nnodes = [\"web-01\"]\n[rollout.wave.canary.file.\"/etc/motd\"]\ncontent = \"\"\n",
			want{5, "rollout.wave.canary.file", "unknown key (want nodes or labels)", false}},
		{"malformed wave pattern", roleHead + "[rollout.wave.canary]\nnodes = [\"web-[\"]\n", want{4, "rollout.wave.canary.nodes", `pattern "web-[" is malformed`, false}},
		{"unknown rollout key", roleHead + "[rollout]\nwaves = 2\n", want{4, "rollout.waves", "unknown key (want wave", false}},
		{"rollout not a table", "rollout = \"canary\"\n" + roleHead, want{1, "rollout", "must be a table", false}},
		{"wave name with a comma", roleHead + "[rollout.wave.\"a,b\"]\nnodes = [\"*\"]\n", want{3, `rollout.wave."a,b"`, "contains a space, a comma", false}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, problems := parseFiles(t, map[string]string{"site.toml": c.toml})
			if d != nil || len(problems) != 1 {
				t.Fatalf("got %d problems, want 1:\n%s", len(problems), problemLines(problems))
			}
			p := problems[0]
			if p.Line != c.want.line || p.Key != c.want.key || !strings.Contains(p.Message, c.want.message) {
				t.Errorf("problem = %s\nwant line %d key %q message containing %q", p, c.want.line, c.want.key, c.want.message)
			}
		})
	}
	// One wave, two files: defined in one place.
	_, problems := parseFiles(t, map[string]string{
		"a.toml": roleHead + "[rollout.wave.canary]\nnodes = [\"web-01\"]\n",
		"b.toml": "[rollout.wave.canary]\nnodes = [\"web-02\"]\n",
	})
	if len(problems) != 1 || !strings.Contains(problems[0].String(), "b.toml:1: rollout.wave.canary: wave canary is already defined at a.toml:3") {
		t.Errorf("a wave defined twice:\n%s", problemLines(problems))
	}
}
