package tomlfile

import (
	"errors"
	"strings"
	"testing"
	"time"
)

type doc struct {
	Name  string `toml:"name"`
	Count int    `toml:"count"`
}

func TestDecodeIsStrict(t *testing.T) {
	var d doc
	if err := Decode([]byte("name = \"a\"\ncount = 2\n"), &d); err != nil || d.Name != "a" || d.Count != 2 {
		t.Fatalf("good file: %v %+v", err, d)
	}
	err := Decode([]byte("name = \"a\"\ncuont = 2\n"), &d)
	if err == nil || err.Error() != `line 2: cuont: unknown key` {
		t.Errorf("mistyped key: %v", err)
	}
	if got := In("x.toml", err); got == nil || got.Error() != `x.toml:2: cuont: unknown key` {
		t.Errorf("In: %v, want x.toml:2: cuont: unknown key", got)
	}
	// A table the reader does not know is named with its line; so is a
	// key in it, written as an inline table's.
	var n struct {
		Name string `toml:"name"`
		Apt  struct {
			Proxy string `toml:"proxy"`
		} `toml:"apt"`
	}
	for text, want := range map[string]string{
		"name = \"a\"\n\n[apt]\nproxy = \"p\"\nprxoy = \"q\"\n":     `line 5: apt.prxoy: unknown key`,
		"name = \"a\"\n[brief]\nmin = 1\n":                          `line 2: brief: unknown key`,
		"name = \"a\"\napt = { proxy = \"p\",\n  prxoy = \"q\" }\n": `line 3: apt.prxoy: unknown key`,
	} {
		if err := Decode([]byte(text), &n); err == nil || err.Error() != want {
			t.Errorf("%q: %v, want %s", text, err, want)
		}
	}
	err = Decode([]byte("name = \"a\"\ncount = = 2\n"), &d)
	if err == nil || !strings.HasPrefix(err.Error(), "line 2:") {
		t.Errorf("syntax error: %v", err)
	}
	if got := In("x.toml", err).Error(); !strings.HasPrefix(got, "x.toml:2: ") {
		t.Errorf("In: %q, want x.toml:2: ...", got)
	}
	if err := Decode([]byte("count = \"x\"\n"), &d); err == nil {
		t.Error("wrong type accepted")
	}
}

func TestEncodeRoundTrips(t *testing.T) {
	b, err := Encode("# header", doc{Name: "x", Count: 3})
	if err != nil || !strings.HasPrefix(string(b), "# header\n") {
		t.Fatalf("%v %q", err, b)
	}
	var d doc
	if err := Decode(b, &d); err != nil || d != (doc{Name: "x", Count: 3}) {
		t.Fatalf("round trip: %v %+v", err, d)
	}
}

// A value of a type the reader has no place for is named at its key's
// line, its types as TOML names them; what decodes is left alone.
func TestDecodeNamesTheWrongType(t *testing.T) {
	type conf struct {
		Spool string `toml:"spool"`
		Brief struct {
			MinFree int64 `toml:"min_free_mb"`
		} `toml:"brief"`
		Apt struct {
			Options []string `toml:"options"`
			Update  bool     `toml:"update"`
		} `toml:"apt"`
		Ratio  float64           `toml:"ratio"`
		At     time.Time         `toml:"at"`
		Labels map[string]string `toml:"labels"`
	}
	for text, want := range map[string]string{
		"spool = 3\n": `line 1: spool: must be a string, not an integer`,
		"spool = \"s\"\n\n[brief]\nmin_free_mb = \"256\"\n": `line 4: brief.min_free_mb: must be an integer, not a string`,
		"[apt]\noptions = \"a=b\"\n":                        `line 2: apt.options: must be an array, not a string`,
		"[apt]\noptions = [\"a\", 2]\n":                     `line 2: apt.options: must be a string, not an integer`,
		"[apt]\nupdate = \"yes\"\n":                         `line 2: apt.update: must be a boolean, not a string`,
		"apt = 1\n":                                         `line 1: apt: must be a table, not an integer`,
		"ratio = true\n":                                    `line 1: ratio: must be a number, not a boolean`,
		"[labels]\nrack = 1\n":                              `line 2: labels.rack: must be a string, not an integer`,
		// the first by line when there are two
		"[apt]\nupdate = 1\n[brief]\nmin_free_mb = \"x\"\n": `line 2: apt.update: must be a boolean, not an integer`,
	} {
		var c conf
		err := Decode([]byte(text), &c)
		if err == nil || err.Error() != want {
			t.Errorf("%q: %v, want %s", text, err, want)
		}
	}
	var c conf
	err := Decode([]byte("ratio = 2\nat = 2026-12-05T00:00:00Z\n[brief]\nmin_free_mb = 1\n"), &c)
	if err != nil || c.Ratio != 2 || c.Brief.MinFree != 1 {
		t.Errorf("good values: %v %+v", err, c)
	}
	err = Decode([]byte("\n\nspool = 3\n"), &c)
	if got := In("h.toml", err); got == nil || got.Error() != "h.toml:3: spool: must be a string, not an integer" {
		t.Errorf("In: %v", got)
	}
}

// FuzzDecode: whatever a file holds, Decode into a typed reader never
// panics, and an error about a line names a line of the file.
func FuzzDecode(f *testing.F) {
	f.Add([]byte("spool = \"s\"\n[brief]\nmin = 1\n"))
	f.Add([]byte("spool = 3\n[apt]\noptions = [1, \"a\"]\nupdate = \"no\"\n"))
	f.Add([]byte("[[list]]\nx = 1\n[[list]]\nx = \"2\"\n[labels]\na = 1\n"))
	f.Add([]byte("apt = { options = [\"a\"], update = true, extra = 1 }\nratio = 1\nat = 1979-05-27T07:32:00Z\n"))
	type reader struct {
		Spool string `toml:"spool"`
		Brief struct {
			Min int64 `toml:"min"`
		} `toml:"brief"`
		Apt *struct {
			Options []string `toml:"options"`
			Update  bool     `toml:"update"`
		} `toml:"apt"`
		List []struct {
			X int `toml:"x"`
		} `toml:"list"`
		Labels map[string]string `toml:"labels"`
		Ratio  float64           `toml:"ratio"`
		At     time.Time         `toml:"at"`
		Any    any               `toml:"any"`
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r reader
		err := Decode(data, &r)
		var le atLine
		if errors.As(err, &le) {
			if line, _ := le.at(); line > strings.Count(string(data), "\n")+1 {
				t.Fatalf("%v: the file has %d lines", err, strings.Count(string(data), "\n")+1)
			}
		}
	})
}
