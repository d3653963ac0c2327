package spool

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestValidName(t *testing.T) {
	for _, tc := range []struct {
		name string
		why  string // "" means valid
	}{
		{"mesh/keys", ""},
		{"report/n1/00000000000000000001-00000000000000000002", ""},
		{"a", ""},
		{"a.b_c-d/0", ""},
		{"a..b", ""},
		{strings.Repeat("a", MaxSegmentLen), ""},
		{"", "empty"},
		{"/a", "starts with /"},
		{"a/", "ends with /"},
		{"a//b", "empty segment"},
		{".", "starts with a dot"},
		{"..", "starts with a dot"},
		{"a/../b", "starts with a dot"},
		{".muster-tmp-x", "starts with a dot"},
		{"-r", "starts with a dash"},
		{"a/b.", "ends with a dot"},
		{"A", `"A" is not allowed`},
		{"a b", `" " is not allowed`},
		{"a\\b", `"\\" is not allowed`},
		{"a\x00", `"\x00" is not allowed`},
		{"\xff", `"\xff" is not allowed`},
		{strings.Repeat("a", MaxSegmentLen+1), "longer than 128"},
		{strings.Repeat("a/", MaxNameLen/2) + "a", "longer than 1024"},
	} {
		err := ValidName(tc.name)
		switch {
		case tc.why == "" && err != nil:
			t.Errorf("ValidName(%q): %v, want nil", tc.name, err)
		case tc.why != "" && (!errors.Is(err, ErrBadName) || !strings.Contains(err.Error(), tc.why)):
			t.Errorf("ValidName(%q): %v, want ErrBadName saying %s", tc.name, err, tc.why)
		}
	}
}

func TestValidPrefix(t *testing.T) {
	for _, tc := range []struct {
		prefix string
		ok     bool
	}{
		{"", true},
		{"r", true},
		{"report/", true},
		{"report/n1/0000", true},
		{"a.", true}, // may continue as "a.b"
		{"/", false},
		{"/a", false},
		{"a//", false},
		{"a./", false},
		{".", false},
		{"a/.", false},
		{"-", false},
		{"A", false},
		{strings.Repeat("a", MaxNameLen+1), false},
	} {
		err := ValidPrefix(tc.prefix)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrBadName)) {
			t.Errorf("ValidPrefix(%q) = %v, want ok=%v", tc.prefix, err, tc.ok)
		}
	}
}

// FuzzValidName: a valid name is a clean, relative path that stays inside
// the spool and is a valid prefix of itself.
func FuzzValidName(f *testing.F) {
	for _, s := range []string{"a", "a/b", "../a", "a/./b", "/a", "a//b", ".muster-tmp-1", "report/n1/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if ValidName(name) != nil {
			return
		}
		p := filepath.FromSlash(name)
		if filepath.Clean(p) != p || filepath.IsAbs(p) || !filepath.IsLocal(p) {
			t.Errorf("valid name %q is not a clean local path", name)
		}
		if err := ValidPrefix(name); err != nil {
			t.Errorf("valid name %q is not a valid prefix: %v", name, err)
		}
		if err := ValidPrefix(name + "/"); len(name) < MaxNameLen && err != nil {
			t.Errorf("valid name %q plus / is not a valid prefix: %v", name, err)
		}
	})
}

func TestGenerationName(t *testing.T) {
	for _, n := range []uint64{0, 1, 9, 10, 12345, math.MaxUint64} {
		s := GenerationName(n)
		if len(s) != 20 {
			t.Errorf("GenerationName(%d) = %q, want 20 digits", n, s)
		}
		if got, err := ParseGeneration(s); err != nil || got != n {
			t.Errorf("ParseGeneration(%q) = %d, %v, want %d", s, got, err, n)
		}
	}
	// Lexical order of names is numeric order: listing the spool lists
	// generations oldest first.
	r := rand.New(rand.NewPCG(5, 6))
	for range 1000 {
		a, b := r.Uint64()>>r.UintN(64), r.Uint64()>>r.UintN(64)
		if (a < b) != (GenerationName(a) < GenerationName(b)) {
			t.Fatalf("order of %d and %d differs from order of their names", a, b)
		}
	}
	for _, bad := range []string{"", "1", "0000000000000000001", "000000000000000000001",
		"+0000000000000000001", "-0000000000000000001", "0000000000000000000a",
		"99999999999999999999", "1e100000000000000000", " 0000000000000000001"} {
		if _, err := ParseGeneration(bad); err == nil || !strings.Contains(err.Error(), "generation") {
			t.Errorf("ParseGeneration(%q): %v, want an error", bad, err)
		}
		if _, err := ParseSeq(bad); err == nil {
			t.Errorf("ParseSeq(%q) accepted it", bad)
		}
	}
}

func TestLayoutNames(t *testing.T) {
	names := map[string]string{
		MeshKeysName:            "mesh/keys",
		TokenName("t1"):         "enrol/token/t1",
		JoinName("t1", "fp"):    "enrol/join/t1/fp",
		AdmitName("t1"):         "enrol/admit/t1",
		RevokeName("n1"):        "enrol/revoke/n1",
		LabelName("n1", 2):      "enrol/label/n1/00000000000000000002",
		BriefName("n1", 2):      "brief/n1/00000000000000000002",
		DeclName(3, "r1", "n1"): "decl/00000000000000000003/r1/n1",
		CommitName(3):           "commit/00000000000000000003",
		ReportName("n1", 3, 4):  "report/n1/00000000000000000003-00000000000000000004",
	}
	for got, want := range names {
		if got != want {
			t.Errorf("built %q, want %q", got, want)
		}
		if err := ValidName(got); err != nil {
			t.Errorf("layout name %q: %v", got, err)
		}
	}
	if g, err := ParseCommitName("commit/00000000000000000003"); err != nil || g != 3 {
		t.Errorf("ParseCommitName = %d, %v", g, err)
	}
	if n, s, err := ParseBriefName("brief/n1/00000000000000000002"); err != nil || n != "n1" || s != 2 {
		t.Errorf("ParseBriefName = %q, %d, %v", n, s, err)
	}
	if n, s, err := ParseLabelName("enrol/label/n1/00000000000000000002"); err != nil || n != "n1" || s != 2 {
		t.Errorf("ParseLabelName = %q, %d, %v", n, s, err)
	}
	if _, _, err := ParseLabelName("enrol/label/n1/2"); err == nil {
		t.Errorf("ParseLabelName accepted a short sequence number")
	}
	if g, r, n, err := ParseDeclName("decl/00000000000000000003/r1/n1"); err != nil || g != 3 || r != "r1" || n != "n1" {
		t.Errorf("ParseDeclName = %d, %q, %q, %v", g, r, n, err)
	}
	if n, g, s, err := ParseReportName("report/n1/00000000000000000003-00000000000000000004"); err != nil || n != "n1" || g != 3 || s != 4 {
		t.Errorf("ParseReportName = %q, %d, %d, %v", n, g, s, err)
	}
	for _, bad := range []string{
		"commit/3", "commit/00000000000000000003/x", "brief/00000000000000000003",
		"report/n1/00000000000000000003", "report/n1/00000000000000000003-4",
		"report//00000000000000000003-00000000000000000004", "decl/00000000000000000003/r1",
		"decl/3/r1/n1", "mesh/keys",
	} {
		_, err1 := ParseCommitName(bad)
		_, _, err2 := ParseBriefName(bad)
		_, _, _, err3 := ParseDeclName(bad)
		_, _, _, err4 := ParseReportName(bad)
		if err1 == nil || err2 == nil || err3 == nil || err4 == nil {
			t.Errorf("%q parsed as a layout name: %v %v %v %v", bad, err1, err2, err3, err4)
		}
	}
}

func TestAbsolute(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		"spool":                   filepath.Join(wd, "spool"),
		"../x/spool":              filepath.Join(filepath.Dir(wd), "x/spool"),
		"/srv/spool":              "/srv/spool",
		"dir:spool":               "dir:" + filepath.Join(wd, "spool"),
		"s3://bucket/p?tls=false": "s3://bucket/p?tls=false",
		"file:///srv/spool":       "file:///srv/spool",
		"":                        "",
	} {
		if got, err := Absolute(in); err != nil || got != want {
			t.Errorf("Absolute(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
