package repo

import (
	"strings"
	"testing"

	"github.com/muster-tool/muster/spool"
)

// Every Debian name and version must map to a valid object name, and two
// different packages never to the same one.
func TestObjectName(t *testing.T) {
	cases := []struct{ name, version, arch, want string }{
		{"muster", "1.4.2-1", "amd64", "repo/pool/muster/1.4.2-1_amd64.deb"},
		{"muster", "1:1.4.2", "arm64", "repo/pool/muster/1_3a1.4.2_arm64.deb"},
		{"g++", "4.0~rc1", "all", "repo/pool/g_2b_2b/4.0_7erc1_all.deb"},
		{"lib.", "1.0.", "all", "repo/pool/lib_2e/1.0_2e_all.deb"},
		{"muster", "1.0+git3.gABC", "amd64", "repo/pool/muster/1.0_2bgit3.g_41_42_43_amd64.deb"},
	}
	for _, c := range cases {
		got := ObjectName(c.name, c.version, c.arch)
		if got != c.want {
			t.Errorf("ObjectName(%q, %q, %q) = %q, want %q", c.name, c.version, c.arch, got, c.want)
		}
		if err := spool.ValidName(got); err != nil {
			t.Errorf("ObjectName(%q, %q, %q): %v", c.name, c.version, c.arch, err)
		}
	}
	// Pairs that naive escaping would merge.
	seen := map[string]string{}
	for _, p := range [][3]string{
		{"a+", "2b1", "all"}, {"a", "2b+1", "all"}, {"a", "1", "b-all"}, {"a", "1-b", "all"},
		{"ab", "1", "all"}, {"a.b", "1", "all"}, {"a", "1A", "all"}, {"a", "1_41", "all"},
	} {
		n := ObjectName(p[0], p[1], p[2])
		if prev, ok := seen[n]; ok {
			t.Errorf("%v and %s share object name %s", p, prev, n)
		}
		seen[n] = strings.Join(p[:], " ")
	}
}

func TestParseControl(t *testing.T) {
	good := "Package: muster\nVersion: 1.0\nArchitecture: amd64\nFilename: x.deb\nSHA256: 00\nDescription: short\n long\n .\n more\nConffiles:\n /etc/x 0123\n"
	c, err := parseControl(good)
	if err != nil {
		t.Fatal(err)
	}
	if c.get("package") != "muster" || c.get("Description") != "short" {
		t.Errorf("fields: %+v", c.fields)
	}
	want := "Package: muster\nVersion: 1.0\nArchitecture: amd64\nDescription: short\n long\n .\n more\nConffiles:\n /etc/x 0123\n"
	if got := c.withoutIndexFields(); got != want {
		t.Errorf("withoutIndexFields:\n%q\nwant\n%q", got, want)
	}
	for _, bad := range []string{
		"",
		"Package: a\n\nPackage: b\n",
		" continuation first\n",
		"Package: a\nPackage: b\n",
		"Package: a\nnot a field\n",
		"Package: a\n  \n",
	} {
		if _, err := parseControl(bad); err == nil {
			t.Errorf("parseControl(%q) accepted it", bad)
		}
	}
}
