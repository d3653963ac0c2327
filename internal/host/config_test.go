package host

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/keys"
)

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, text string
		want       string // in the error; "" if it loads
	}{
		{"complete", "spool = \"/srv/spool\"\nnode = \"web-1\"\nstate = \"/var/lib/muster\"\n[brief]\nmin_free_root_mb = 512\n[apt]\nupdate = true\noptions = [\"Acquire::Retries=3\"]\n", ""},
		{"unknown key", "spool = \"s\"\nnode = \"n\"\nstate = \"d\"\noutcome = \"eligible\"\n", `outcome: unknown key`},
		{"unknown threshold", "spool = \"s\"\nnode = \"n\"\nstate = \"d\"\n[brief]\nmin_free_mb = 1\n", `brief.min_free_mb: unknown key`},
		{"missing node", "spool = \"s\"\nstate = \"d\"\n", `missing key "node"`},
		{"negative threshold", "spool = \"s\"\nnode = \"n\"\nstate = \"d\"\n[brief]\nmin_free_state_mb = -1\n", "cannot be negative"},
		{"bad syntax", "spool = \"s\"\nnode = \n", "muster.toml:2:"},
		{"bad contact interval", "spool = \"s\"\nnode = \"n\"\nstate = \"d\"\n[report]\ncontact_interval = \"hourly\"\n", `contact_interval = "hourly" is not a duration`},
		{"negative contact interval", "spool = \"s\"\nnode = \"n\"\nstate = \"d\"\n[report]\ncontact_interval = \"-1h\"\n", `contact_interval = "-1h" is not a duration of 0s or more`},
		// Five million levels would overflow the TOML library's stack.
		{"deep", "spool = \"s\"\nnode = \"n\"\nx = " + strings.Repeat("[", 5_000_000), "muster.toml:3: nesting deeper than 64 levels (the cap on TOML nesting)"},
		{"huge", "spool = \"s\"\n#" + strings.Repeat("x", 64<<20), "muster.toml: 67108877 bytes, more than 67108864 (the cap on the size of a TOML document, 64 MiB)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(dir, tt.name, "muster.toml")
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, []byte(tt.text), 0o644); err != nil {
				t.Fatal(err)
			}
			c, err := LoadConfig(p)
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if c.Brief.WithDefaults() != (BriefConfig{MinFreeStateMB: DefaultMinFreeStateMB, MinFreeRootMB: 512}) || !c.Apt.Update || len(c.Apt.Options) != 1 {
					t.Errorf("loaded %+v", c)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), p) {
				t.Errorf("got %v, want an error naming %s and %q", err, p, tt.want)
			}
		})
	}
	missing := filepath.Join(dir, "none.toml")
	if _, err := LoadConfig(missing); err == nil || !strings.Contains(fault.HintOf(err), "muster enrol join") {
		t.Errorf("missing config: %v, want a hint to join", err)
	}
	if c, err := ReadConfig(missing); c != nil || err != nil {
		t.Errorf("ReadConfig of a missing file: %v, %v", c, err)
	}
}

func TestContactInterval(t *testing.T) {
	for _, tc := range []struct {
		set  string
		want time.Duration
	}{{"", DefaultContactInterval}, {"30m", 30 * time.Minute}, {"0s", 0}} {
		p := filepath.Join(t.TempDir(), "muster.toml")
		text := "spool = \"s\"\nnode = \"n\"\nstate = \"d\"\n"
		if tc.set != "" {
			text += "[report]\ncontact_interval = \"" + tc.set + "\"\n"
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := LoadConfig(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Report.Interval(); got != tc.want {
			t.Errorf("contact_interval %q: %v, want %v", tc.set, got, tc.want)
		}
	}
}

func TestConfigRoundTrip(t *testing.T) {
	p := filepath.Join(t.TempDir(), "etc", "muster.toml")
	want := &Config{Spool: "/srv/spool", Node: "web-1", State: "/var/lib/muster", Brief: BriefConfig{MinFreeStateMB: 10, MinFreeRootMB: 20}, Apt: AptConfig{Options: []string{"A=b"}}}
	if err := WriteConfig(p, want); err != nil {
		t.Fatal(err)
	}
	got, err := LoadConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	if got.Spool != want.Spool || got.Node != want.Node || got.State != want.State || got.Brief != want.Brief || got.Apt.Options[0] != "A=b" {
		t.Errorf("round trip: %+v", got)
	}
}

func TestIdentityFiles(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	pair, _ := keys.Generate()
	meshPair, _ := keys.Generate()
	if HasIdentity(state) {
		t.Fatal("identity in a new directory")
	}
	if err := WriteIdentity(state, pair, meshPair.Public()); err != nil {
		t.Fatal(err)
	}
	if err := WriteIdentity(state, pair, meshPair.Public()); err == nil {
		t.Error("an identity was overwritten")
	}
	for _, f := range []string{"", "host.age", "host.sign", "mesh.pub"} {
		st, err := os.Stat(filepath.Join(state, f))
		if err != nil {
			t.Fatal(err)
		}
		want := os.FileMode(0o600)
		if f == "" {
			want = 0o700
		}
		if st.Mode().Perm() != want {
			t.Errorf("%s has mode %04o, want %04o", filepath.Join(state, f), st.Mode().Perm(), want)
		}
	}
	id, err := LoadIdentity(&Config{State: state, Node: "web-1"})
	if err != nil || id.NodeID() != pair.Public().Fingerprint() || id.Mesh != meshPair.Public() {
		t.Fatalf("load: %+v, %v", id, err)
	}
	// Set aside and put back, as a failed join --force does.
	restore, _, err := SetIdentityAside(state)
	if err != nil {
		t.Fatal(err)
	}
	if HasIdentity(state) {
		t.Error("identity still in place after setting it aside")
	}
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	if id, err := LoadIdentity(&Config{State: state}); err != nil || id.NodeID() != pair.Public().Fingerprint() {
		t.Fatalf("after restore: %v", err)
	}
	// Set aside and discard, as a forced join that succeeds does.
	_, discard, err := SetIdentityAside(state)
	if err != nil {
		t.Fatal(err)
	}
	if err := discard(); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(state); len(entries) != 0 {
		t.Errorf("after discarding, the state directory holds %v", entries)
	}
	// A tampered pin is refused.
	if err := WriteIdentity(state, pair, meshPair.Public()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(state, "mesh.pub"), []byte("[mesh]\nage = \"age1nope\"\nsign = \"ed25519:x\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadIdentity(&Config{State: state}); err == nil || !strings.Contains(err.Error(), "mesh.pub") {
		t.Errorf("tampered pinned keys: %v", err)
	}
}
