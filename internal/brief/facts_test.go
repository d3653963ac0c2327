package brief_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"

	"github.com/muster-tool/muster/internal/brief"
)

// A briefing carries the host's facts: the root's os-release and host
// name, and the machine's architecture, processors, memory and addresses.
func TestBriefingCarriesFacts(t *testing.T) {
	e := goodEnv(t)
	if err := os.WriteFile(filepath.Join(e.Root, "etc/os-release"), []byte("PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\nVERSION_ID=\"12\"\nVERSION_CODENAME=bookworm\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.Root, "etc/hostname"), []byte("web-1.example.org\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := brief.Run(context.Background(), e)
	f := b.Facts
	if f == nil {
		t.Fatal("a briefing without facts")
	}
	if f.Hostname != "web-1.example.org" || f.OSID != "debian" || f.OSVersion != "12" || f.OSCodename != "bookworm" || f.Arch != runtime.GOARCH {
		t.Errorf("facts %+v", f)
	}
	if f.CPUs < 1 || f.MemoryMB < 1 || f.Addresses == nil {
		t.Errorf("facts %+v: no processors, memory or address list", f)
	}
	for _, a := range f.Addresses {
		if strings.HasPrefix(a, "127.") || a == "::1" || strings.HasPrefix(a, "fe80:") || strings.Contains(a, "/") {
			t.Errorf("address %q is loopback, link-local or has a prefix length", a)
		}
	}
	// The facts travel in the document and come back the same.
	var buf strings.Builder
	if err := toml.NewEncoder(&buf).Encode(b); err != nil {
		t.Fatal(err)
	}
	var back brief.Briefing
	md, err := toml.Decode(buf.String(), &back)
	if err != nil || len(md.Undecoded()) > 0 {
		t.Fatalf("decode: %v, undecoded %v", err, md.Undecoded())
	}
	if !reflect.DeepEqual(back.Facts.Map(), f.Map()) {
		t.Errorf("facts after a round trip %+v, want %+v", back.Facts, f)
	}
}

// A briefing from a muster older than facts still decodes, without them.
func TestBriefingWithoutFactsDecodes(t *testing.T) {
	var b brief.Briefing
	md, err := toml.Decode("version = 1\nnode = \"web-1\"\ntime = 2026-03-01T12:00:00Z\nmuster = \"1.4\"\n[[line]]\nid = \"os\"\nstatus = \"ok\"\ndetail = \"debian\"\n", &b)
	if err != nil || len(md.Undecoded()) > 0 || b.Check() != nil || b.Facts != nil {
		t.Errorf("decode: %v, undecoded %v, check %v, facts %+v", err, md.Undecoded(), b.Check(), b.Facts)
	}
}

// Map names each fact by its key in the document, plus ipv4 and ipv6;
// FactNames lists them all, and a fact the host could not read is left
// out rather than given as empty.
func TestFactNames(t *testing.T) {
	var names []string
	ft := reflect.TypeOf(brief.Facts{})
	for i := range ft.NumField() {
		names = append(names, ft.Field(i).Tag.Get("toml"))
	}
	names = append(names, "ipv4", "ipv6")
	slices.Sort(names)
	if !slices.Equal(names, brief.FactNames) {
		t.Errorf("FactNames %v, want %v", brief.FactNames, names)
	}
	full := &brief.Facts{Hostname: "h", OSID: "debian", OSVersion: "12", OSCodename: "bookworm", Arch: "amd64", CPUs: 2, MemoryMB: 1024,
		Addresses: []string{"192.0.2.1", "198.51.100.7", "2001:db8::1"}}
	m := full.Map()
	var got []string
	for k := range m {
		got = append(got, k)
	}
	slices.Sort(got)
	if !slices.Equal(got, brief.FactNames) {
		t.Errorf("Map has %v, want %v", got, brief.FactNames)
	}
	if !slices.Equal(m["ipv4"].([]string), []string{"192.0.2.1", "198.51.100.7"}) || !slices.Equal(m["ipv6"].([]string), []string{"2001:db8::1"}) {
		t.Errorf("ipv4 %v, ipv6 %v", m["ipv4"], m["ipv6"])
	}
	m = (&brief.Facts{Arch: "amd64"}).Map()
	for _, k := range []string{"hostname", "os_id", "os_version", "os_codename", "cpus", "memory_mb"} {
		if _, ok := m[k]; ok {
			t.Errorf("a fact the host could not read is in the map: %s", k)
		}
	}
}
