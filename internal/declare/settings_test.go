package declare

import (
	"reflect"
	"strings"
	"testing"

	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/spool"
)

const settingsSite = `
[role.web]
nodes = ["web-*"]

[role.web.file."/etc/motd"]
content = "hello\n"
mode = "0644"

[role.web.file."/etc/token"]
content = "SECRET-MARKER-1"
secret = true

[role.web.file."/usr/share/logo.bin"]
source = "logo.bin"

[role.web.service.web]
enabled = true
`

func settingsSource(mode, token string) string {
	s := strings.Replace(settingsSite, "SECRET-MARKER-1", token, 1)
	return strings.Replace(s, `mode = "0644"`, `mode = "`+mode+`"`, 1)
}

func logo(b ...byte) map[string]string { return map[string]string{"logo.bin": string(b)} }

// The settings document a declare writes for the next dry run holds every
// resource's settings, sealed to the mesh, and a secret's digest, never its
// content.
func TestSettingsHoldNoSecret(t *testing.T) {
	f := newFixture(t)
	f.enrol("web-1", nil)
	res := f.mustDeclare(f.parse(settingsSource("0644", "SECRET-MARKER-1"), logo(0xff, 1, 2)), Options{})
	data, err := f.m.Spool.Get(f.ctx, spool.SettingsName(1, res.Run), 0)
	if err != nil {
		t.Fatal(err)
	}
	var doc generation.Settings
	if err := bundle.OpenTOML(data, generation.SettingsCtx(1, res.Run), f.m.Pair.Age, f.m.Verifier(), &doc); err != nil {
		t.Fatal(err)
	}
	plain, _ := bundle.Open(data, generation.SettingsCtx(1, res.Run), f.m.Pair.Age, f.m.Verifier())
	if strings.Contains(string(plain), "SECRET-MARKER") {
		t.Error("the settings document holds a secret's content")
	}
	man, err := ReadManifest(f.ctx, f.m, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Resources) != len(man.Resources) {
		t.Fatalf("%d settings for %d resources", len(doc.Resources), len(man.Resources))
	}
	for i, r := range doc.Resources {
		if r.ID() != man.Resources[i].ID {
			t.Errorf("settings %d is %s, manifest's is %s", i, r.ID(), man.Resources[i].ID)
		}
		if r.ID() == "file:/etc/token" && (r.Content != "" || len(r.ContentSHA256) != 64) {
			t.Errorf("secret settings: %+v", r)
		}
		if r.ID() == "file:/etc/motd" && (r.Content != "hello\n" || r.Mode != "0644") {
			t.Errorf("motd's settings: %+v", r)
		}
	}
}

// A dry run shows old and new values of the settings that change; a
// secret's content only as changed, and binary content by size.
func TestDryRunShowsOldAndNewSettings(t *testing.T) {
	f := newFixture(t)
	f.enrol("web-1", nil)
	f.mustDeclare(f.parse(settingsSource("0644", "SECRET-MARKER-1"), logo(0xff, 1, 2)), Options{})
	src := settingsSource("0600", "SECRET-MARKER-2")
	src = strings.Replace(src, "enabled = true", "enabled = false\nrunning = true", 1)
	res := f.mustDeclare(f.parse(src, logo(0xff, 1, 2, 3, 4)), Options{DryRun: true})
	got := map[string]ResourceChange{}
	for _, c := range res.Nodes[0].Changes {
		c.Key = ""
		got[c.ID] = c
	}
	want := map[string]ResourceChange{
		"file:/etc/motd":           {ID: "file:/etc/motd", Settings: []SettingChange{{"mode", "0644", "0600"}}},
		"file:/etc/token":          {ID: "file:/etc/token", Content: "content changed (secret, not shown)"},
		"file:/usr/share/logo.bin": {ID: "file:/usr/share/logo.bin", Content: "content changed (binary, 3 bytes → 5 bytes)"},
		"service:web.service":      {ID: "service:web.service", Settings: []SettingChange{{"enabled", "true", "false"}, {"running", "(none)", "true"}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("changes\n%+v\nwant\n%+v", got, want)
	}
	for _, c := range res.Nodes[0].Changes {
		if strings.Contains(c.Content, "SECRET") {
			t.Errorf("%s: a secret's content is shown", c.ID)
		}
	}
}

// A generation declared before settings were recorded: the dry run still
// lists the change, and says why it shows no old values.
func TestDryRunWithoutOldSettings(t *testing.T) {
	f := newFixture(t)
	f.enrol("web-1", nil)
	first := f.mustDeclare(f.parse(settingsSource("0644", "x"), logo(0xff)), Options{})
	if err := f.m.Spool.Delete(f.ctx, spool.SettingsName(1, first.Run)); err != nil {
		t.Fatal(err)
	}
	res := f.mustDeclare(f.parse(settingsSource("0600", "x"), logo(0xff)), Options{DryRun: true})
	c := res.Nodes[0].Changes
	if len(c) != 1 || c[0].ID != "file:/etc/motd" || len(c[0].Settings) != 0 || !strings.Contains(c[0].Note, "generation 1 has no settings recorded") {
		t.Errorf("changes %+v", c)
	}
}
