package report

import (
	"crypto/ed25519"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/keys"
	"github.com/muster-tool/muster/internal/ledger"
	"github.com/muster-tool/muster/internal/outcome"
)

// hostile holds strings that need every kind of care in TOML: quotes,
// backslashes, each control character, DEL, non-ASCII, text that looks
// like TOML syntax, and bytes that are not UTF-8.
var hostile = func() []string {
	var ctl strings.Builder
	for c := range 0x20 {
		ctl.WriteByte(byte(c))
	}
	ctl.WriteByte(0x7f)
	return []string{
		"",
		`say "hi" \ back\slash \\ \n \u0041`,
		ctl.String(),
		"tab\tnewline\ncr\rform\fbs\b",
		"caf\u00e9 \u2028 \u0085 \u00a0 \ufeff \U0001F600 \ufffd \uffff",
		"\"\n[[line]]\n  id = \"injected\"\nstatus = \"ok\"\n",
		"notes = [\"a\", \"b\"]",
		"'literal' '''multi''' \"\"\"basic\"\"\" # not a comment",
		"bad \xff utf-8 \xc3 end \xed\xa0\x80 surrogate",
		"\x00\x00\x00\x00\x00\x00 starts with NULs",
		strings.Repeat("long ", 2000),
	}
}()

var codecT0 = time.Date(2026, 11, 1, 9, 0, 0, 123456789, time.UTC)

// codecReports are varied reports for round trips.
func codecReports() []*Report {
	bench := &Report{Version: FormatVersion, Node: "node-00042", NodeID: "0123456789abcdef0123456789abcdef", Generation: 10,
		Start: codecT0.Add(-3 * time.Second), End: codecT0, Muster: "1.0.0", NewestSeen: 10}
	for k := range 10 {
		path := "/etc/app/conf.d/0" + string(rune('0'+k)) + ".conf"
		bench.Lines = append(bench.Lines, outcome.Line{ID: "file:" + path, Status: outcome.OK, Digest: "sha256:0123"})
		bench.Ledger = append(bench.Ledger, ledger.Entry{ID: "file:" + path, Kind: "file", Path: path, Digest: "sha256:0123", Created: true})
	}
	bench.Lines = append(bench.Lines, outcome.Line{ID: "service:nginx", Status: outcome.Failed, Detail: "nginx.service is not active"})

	rs := []*Report{
		bench,
		{},
		{Version: FormatVersion},
		{Version: -7, Generation: math.MaxInt64, NewestSeen: math.MaxInt64},
		{Version: FormatVersion, Lines: []outcome.Line{}},
		{Version: FormatVersion, Lines: []outcome.Line{}, Notes: []string{"only a note"}, Ledger: []ledger.Entry{{}}},
		{Version: FormatVersion, Notes: []string{}, Ledger: []ledger.Entry{}},
		{Version: FormatVersion, Lines: []outcome.Line{{}}, Notes: []string{""}},
		{Version: FormatVersion, Ledger: []ledger.Entry{{ID: "package:nginx", Kind: "package", Name: "nginx"}, {ID: "d", Kind: "directory", Path: "/srv", Created: true}}},
		// Times: local zones, monotonic readings and whole seconds.
		{Version: FormatVersion, Start: time.Date(2026, 3, 29, 2, 30, 0, 0, time.FixedZone("CEST", 2*3600)), End: time.Now()},
		{Version: FormatVersion, Start: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), End: time.Date(0, 1, 1, 0, 0, 0, 1, time.UTC)},
		{Version: FormatVersion, Start: time.Unix(1, 0), End: time.Unix(0, 100).In(time.Local)},
	}
	for _, s := range hostile {
		rs = append(rs, &Report{
			Version: FormatVersion, Node: s, NodeID: s, Muster: s, Start: codecT0, End: codecT0,
			Lines:  []outcome.Line{{ID: s, Status: outcome.Status(s), Detail: s, Digest: s}},
			Notes:  []string{s, s},
			Ledger: []ledger.Entry{{ID: s, Kind: "file", Path: s, Name: s, Digest: s, Created: true}},
		})
	}
	return rs
}

// normal is what a report reads back as: times in UTC without a monotonic
// reading, bytes that are not UTF-8 as U+FFFD, and empty notes and
// ledgers absent (they are omitted when empty).
func normal(r *Report) *Report {
	n := *r
	fix := func(s string) string {
		var b strings.Builder
		for _, c := range s { // each byte that is not UTF-8 is one RuneError
			b.WriteRune(c)
		}
		return b.String()
	}
	n.Node, n.NodeID, n.Muster = fix(r.Node), fix(r.NodeID), fix(r.Muster)
	n.Start, n.End = r.Start.Round(0).UTC(), r.End.Round(0).UTC()
	if r.Lines != nil {
		n.Lines = []outcome.Line{}
		for _, l := range r.Lines {
			n.Lines = append(n.Lines, outcome.Line{ID: fix(l.ID), Status: outcome.Status(fix(string(l.Status))), Detail: fix(l.Detail), Digest: fix(l.Digest)})
		}
	}
	n.Notes = nil
	for _, s := range r.Notes {
		n.Notes = append(n.Notes, fix(s))
	}
	n.Ledger = nil
	for _, e := range r.Ledger {
		e.ID, e.Path, e.Name, e.Digest = fix(e.ID), fix(e.Path), fix(e.Name), fix(e.Digest)
		n.Ledger = append(n.Ledger, e)
	}
	return &n
}

// strict decodes p the way every other bundle payload is decoded.
func strict(p []byte) (*Report, error) {
	var r Report
	if err := bundle.DecodeTOMLStrict(p, bundle.Context{Kind: "report"}, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

func TestCodecRoundTrip(t *testing.T) {
	for i, r := range codecReports() {
		p := Marshal(r)
		fast, ok := unmarshalCanonical(p)
		if !ok {
			t.Errorf("report %d: the fast path refused what Marshal wrote:\n%s", i, p)
			continue
		}
		want := normal(r)
		if !reflect.DeepEqual(fast, want) {
			t.Errorf("report %d: read back\n%#v\nwant\n%#v", i, fast, want)
		}
		slow, err := strict(p)
		if err != nil {
			t.Errorf("report %d: the strict decoder refused what Marshal wrote: %v\n%s", i, err, p)
			continue
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Errorf("report %d: fast path\n%#v\nstrict decoder\n%#v", i, fast, slow)
		}
		got, err := Unmarshal(p)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("report %d: Unmarshal = %#v, %v", i, got, err)
		}
	}
}

// Reports in UTC and in UTF-8 are written exactly as BurntSushi/toml's
// encoder wrote them before this codec, so those reports, already in
// spools, read on the fast path.
func TestMarshalMatchesEncoder(t *testing.T) {
	for i, r := range codecReports() {
		if strings.Contains(string(Marshal(r)), "\ufffd") || r.Start.Location() != time.UTC || r.End.Location() != time.UTC {
			continue
		}
		want, err := toml.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if got := Marshal(r); string(got) != string(want) {
			t.Errorf("report %d: Marshal wrote\n%q\nthe encoder writes\n%q", i, got, want)
		}
		if _, ok := unmarshalCanonical(want); !ok {
			t.Errorf("report %d: the encoder's output is not read on the fast path", i)
		}
	}
}

// canonical is a small report in canonical form, and variants spell the
// same report other ways TOML allows.
const canonical = `version = 1
node = "web-1"
node_id = "abc"
generation = 13
start = 2026-11-01T09:00:00.5Z
end = 2026-11-01T09:00:01Z
muster = "1.0.0"
newest_seen = 3
notes = ["n\"1"]

[[line]]
  id = "file:/etc/motd"
  status = "ok"
  digest = "d1"

[[ledger]]
  id = "file:/etc/motd"
  type = "file"
  path = "/etc/motd"
  created = true
`

func TestUnmarshalNonCanonical(t *testing.T) {
	want, ok := unmarshalCanonical([]byte(canonical))
	if !ok {
		t.Fatal("the canonical sample is not read on the fast path")
	}
	sub := func(old, new string) string {
		if !strings.Contains(canonical, old) {
			t.Fatalf("%q is not in the sample", old)
		}
		return strings.Replace(canonical, old, new, 1)
	}
	for _, tc := range []struct{ name, doc string }{
		{"no spaces around =", sub("version = 1", "version=1")},
		{"comment", "# a report\n" + canonical},
		{"trailing comment", sub(`node = "web-1"`, `node = "web-1" # the host`)},
		{"keys in another order", sub("version = 1\nnode = \"web-1\"", "node = \"web-1\"\nversion = 1")},
		{"literal string", sub(`node = "web-1"`, `node = 'web-1'`)},
		{"multi-line string", sub(`node = "web-1"`, `node = """web-1"""`)},
		{"quoted key", sub(`node = "web-1"`, `"node" = "web-1"`)},
		{"needless escape", sub(`node = "web-1"`, `node = "web\u002d1"`)},
		{"long escape", sub(`node = "web-1"`, `node = "web\U0000002d1"`)},
		{"upper-case hex", sub(`notes = ["n\"1"]`, `notes = ["n\u00221"]`)},
		{"plus sign", sub("generation = 13", "generation = +13")},
		{"underscore", sub("generation = 13", "generation = 1_3")},
		{"hex integer", sub("generation = 13", "generation = 0xd")},
		{"zone offset", sub("end = 2026-11-01T09:00:01Z", "end = 2026-11-01T10:00:01+01:00")},
		{"zero offset", sub("end = 2026-11-01T09:00:01Z", "end = 2026-11-01T09:00:01+00:00")},
		{"lower-case z", sub("end = 2026-11-01T09:00:01Z", "end = 2026-11-01t09:00:01z")},
		{"space in date-time", sub("end = 2026-11-01T09:00:01Z", "end = 2026-11-01 09:00:01Z")},
		{"trailing zeros", sub("start = 2026-11-01T09:00:00.5Z", "start = 2026-11-01T09:00:00.500Z")},
		{"empty optional key", sub(`  digest = "d1"`, "  digest = \"d1\"\n  detail = \"\"")},
		{"created false", sub("  created = true", "  created = false")},
		{"inline tables", sub("\n[[line]]\n  id = \"file:/etc/motd\"\n  status = \"ok\"\n  digest = \"d1\"\n",
			"line = [{id = \"file:/etc/motd\", status = \"ok\", digest = \"d1\"}]\n")},
		{"multi-line array", sub(`notes = ["n\"1"]`, "notes = [\n  \"n\\\"1\",\n]")},
		{"no indent", sub("  id = \"file:/etc/motd\"\n  status", "id = \"file:/etc/motd\"\n  status")},
		{"no blank line", sub("\n\n[[ledger]]", "\n[[ledger]]")},
		{"CRLF", strings.ReplaceAll(canonical, "\n", "\r\n")},
		{"trailing blank line", canonical + "\n"},
		{"trailing spaces", sub("version = 1", "version = 1  ")},
		{"byte order mark", "\ufeff" + canonical},
	} {
		if _, ok := unmarshalCanonical([]byte(tc.doc)); ok {
			t.Errorf("%s: the fast path took a spelling Marshal does not write:\n%s", tc.name, tc.doc)
		}
		got, err := Unmarshal([]byte(tc.doc))
		if err != nil {
			t.Errorf("%s: %v\n%s", tc.name, err, tc.doc)
			continue
		}
		slow, err := strict([]byte(tc.doc))
		if err != nil || !reflect.DeepEqual(got, slow) {
			t.Errorf("%s: Unmarshal gave %#v, the strict decoder %#v, %v", tc.name, got, slow, err)
		}
		if !reflect.DeepEqual(normal(got), normal(want)) && tc.name != "created false" && tc.name != "empty optional key" {
			t.Errorf("%s: read\n%#v\nwant\n%#v", tc.name, got, want)
		}
	}
}

// Unmarshal refuses what every bundle payload is refused for, with the
// same words OpenTOML uses.
func TestUnmarshalRefuses(t *testing.T) {
	sub := func(old, new string) string { return strings.Replace(canonical, old, new, 1) }
	for _, tc := range []struct{ name, doc, want string }{
		{"unknown key", sub("muster = ", "colour = \"red\"\nmuster = "), `unknown key "colour"`},
		{"unknown keys", sub("muster = ", "colour = 1\nshade = 2\nmuster = "), `unknown keys "colour", "shade"`},
		{"unknown line key", sub(`  digest = "d1"`, "  digest = \"d1\"\n  colour = \"red\""), `unknown key "line.colour"`},
		{"unknown ledger key", sub("  created = true", "  created = true\n  mode = 420"), `unknown key "ledger.mode"`},
		{"outcome is not stored", sub("muster = ", "outcome = \"passed\"\nmuster = "), `unknown key "outcome"`},
		{"wrong type", sub("version = 1", `version = "1"`), "payload does not decode"},
		{"generation past int64", sub("generation = 13", "generation = 9223372036854775808"), "payload does not decode"},
		{"duplicate key", sub("version = 1", "version = 1\nversion = 1"), "payload does not decode"},
		{"control character", sub(`node = "web-1"`, "node = \"web\x01-1\""), "payload does not decode"},
		{"not UTF-8", sub(`node = "web-1"`, "node = \"web\xff-1\""), "payload does not decode"},
		{"truncated", canonical[:len(canonical)/2], "payload does not decode"},
	} {
		_, err := Unmarshal([]byte(tc.doc))
		if err == nil {
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		if !errors.Is(err, bundle.ErrPayload) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrPayload and %q", tc.name, err, tc.want)
		}
		if _, ok := unmarshalCanonical([]byte(tc.doc)); ok {
			t.Errorf("%s: the fast path accepted it", tc.name)
		}
	}
	if _, err := Unmarshal(Marshal(&Report{Generation: math.MaxInt64 + 1})); err == nil {
		t.Error("a generation past what TOML holds read back")
	}
}

// The error fleet.Load records for a refused payload reads as it did when
// reports were opened with OpenTOML.
func TestUnmarshalErrorWording(t *testing.T) {
	signer, rcpt := testPair(t), testPair(t)
	ctx := Ctx("abc", 3, 1)
	doc := strings.Replace(canonical, "muster = ", "colour = \"red\"\nmuster = ", 1)
	data, err := bundle.Seal([]byte(doc), ctx, signer.Sign, rcpt.Age.Recipient())
	if err != nil {
		t.Fatal(err)
	}
	var r Report
	want := bundle.OpenTOML(data, ctx, rcpt.Age, signer.Sign.Public().(ed25519.PublicKey), &r)
	p, err := bundle.Open(data, ctx, rcpt.Age, signer.Sign.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	_, got := UnmarshalPayload(p, ctx)
	if want == nil || got == nil || got.Error() != want.Error() {
		t.Errorf("UnmarshalPayload: %v\nOpenTOML: %v", got, want)
	}
}

func testPair(t *testing.T) *keys.Pair {
	t.Helper()
	p, err := keys.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// FuzzUnmarshal: whatever the input, the fast path takes it only if the
// strict decoder reads exactly the same report from it.
func FuzzUnmarshal(f *testing.F) {
	for _, r := range codecReports() {
		f.Add(Marshal(r))
	}
	f.Add([]byte(canonical))
	f.Add([]byte(strings.Replace(canonical, "version = 1", "version = 1\ncolour = 2", 1)))
	f.Add([]byte(strings.Replace(canonical, "generation = 13", "generation = +13", 1)))
	f.Add([]byte(strings.Replace(canonical, "generation = 13", "generation = -13", 1)))
	f.Add([]byte(strings.Replace(canonical, `"web-1"`, `"web\u00e9"`, 1)))
	f.Add([]byte(strings.Replace(canonical, `"web-1"`, `"web\u0001"`, 1)))
	f.Add([]byte(strings.Replace(canonical, "09:00:01Z", "09:00:01+00:00", 1)))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, p []byte) {
		got, err := Unmarshal(p)
		fast, ok := unmarshalCanonical(p)
		if !ok {
			// Unmarshal is the strict decoder here, which is not always
			// deterministic: it matches keys without regard to case, so
			// "line" and "LINE" race for one field.
			return
		}
		slow, serr := strict(p)
		if serr != nil {
			t.Fatalf("the fast path accepted what the strict decoder refuses (%v):\n%q", serr, p)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("fast path\n%#v\nstrict decoder\n%#v\nfrom %q", fast, slow, p)
		}
		if err != nil || !reflect.DeepEqual(got, fast) {
			t.Fatalf("Unmarshal = %#v, %v; fast path %#v", got, err, fast)
		}
	})
}

// FuzzMarshal: any report Marshal writes reads back on the fast path as
// the strict decoder reads it, and as it was written.
func FuzzMarshal(f *testing.F) {
	for _, s := range hostile {
		f.Add(s, s, int64(codecT0.UnixNano()), uint64(7), true)
	}
	f.Add("web-1", "", int64(0), uint64(math.MaxInt64+1), false)
	f.Fuzz(func(t *testing.T, s1, s2 string, nsec int64, gen uint64, created bool) {
		r := &Report{Version: FormatVersion, Node: s1, NodeID: s2, Generation: gen, Start: time.Unix(0, nsec), End: time.Unix(0, -nsec), Muster: s1,
			Lines:  []outcome.Line{{ID: s1, Status: outcome.Status(s2), Detail: s2}, {ID: s2, Status: outcome.OK, Digest: s1}},
			Notes:  []string{s2, s1},
			Ledger: []ledger.Entry{{ID: s2, Kind: "file", Path: s1, Name: s2, Digest: s1, Created: created}},
		}
		p := Marshal(r)
		slow, serr := strict(p)
		fast, ok := unmarshalCanonical(p)
		if gen > math.MaxInt64 {
			if ok || serr == nil {
				t.Fatalf("generation %d read back: fast path %v, strict decoder %v", gen, ok, serr)
			}
			return
		}
		if !ok || serr != nil {
			t.Fatalf("Marshal wrote what does not read back: fast path %v, strict decoder %v\n%q", ok, serr, p)
		}
		if want := normal(r); !reflect.DeepEqual(fast, want) || !reflect.DeepEqual(slow, want) {
			t.Fatalf("fast path\n%#v\nstrict decoder\n%#v\nwant\n%#v", fast, slow, want)
		}
	})
}

// BenchmarkUnmarshal decodes the benchmark spool's report, on the fast
// path and with the strict decoder it replaces.
func BenchmarkUnmarshal(b *testing.B) {
	p := Marshal(codecReports()[0])
	b.Run("fast", func(b *testing.B) {
		b.SetBytes(int64(len(p)))
		for b.Loop() {
			if _, err := Unmarshal(p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("strict", func(b *testing.B) {
		b.SetBytes(int64(len(p)))
		for b.Loop() {
			if _, err := strict(p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("marshal", func(b *testing.B) {
		r := codecReports()[0]
		for b.Loop() {
			Marshal(r)
		}
	})
}
