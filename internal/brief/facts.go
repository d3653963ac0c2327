package brief

import (
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// Facts are what a briefing says about its host beyond the checks: the
// values a declaration's templates may use as {{ .Facts.NAME }}, rendered
// by declare for each node from its newest briefing. A fact the host could
// not read is left empty, and a template that uses it fails to render for
// that node. Each fact is documented in muster-brief(1) and
// muster-declaration(5).
type Facts struct {
	// Hostname is the kernel's host name; with a root other than /, the
	// first line of etc/hostname under the root when it has one.
	Hostname string `toml:"hostname" json:"hostname"`
	// OSID, OSVersion and OSCodename are ID, VERSION_ID and
	// VERSION_CODENAME of etc/os-release under the root, such as
	// "debian", "12" and "bookworm".
	OSID       string `toml:"os_id" json:"os_id"`
	OSVersion  string `toml:"os_version" json:"os_version"`
	OSCodename string `toml:"os_codename" json:"os_codename"`
	// Arch is the machine architecture as Go names it, such
	// as "amd64" or "arm64".
	Arch string `toml:"arch" json:"arch"`
	// CPUs is the number of processors muster may run on.
	CPUs int `toml:"cpus" json:"cpus"`
	// MemoryMB is the machine's memory in MiB.
	MemoryMB int64 `toml:"memory_mb" json:"memory_mb"`
	// Addresses are the host's IP addresses, IPv4 first, each family in
	// order: every address of an interface that is up, except loopback
	// and link-local ones. It may be empty.
	Addresses []string `toml:"addresses" json:"addresses"`
}

// gatherFacts reads the facts of the host, with the fields of root's
// os-release, rel (osReleaseFields), and for a root other than / its
// etc/hostname.
func gatherFacts(root string, rel map[string]string) *Facts {
	f := &Facts{Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), Addresses: addresses()}
	f.Hostname, _ = os.Hostname()
	if root != "/" {
		if data, err := os.ReadFile(filepath.Join(root, "etc", "hostname")); err == nil {
			if line, _, _ := strings.Cut(string(data), "\n"); strings.TrimSpace(line) != "" {
				f.Hostname = strings.TrimSpace(line)
			}
		}
	}
	f.OSID, f.OSVersion, f.OSCodename = rel["ID"], rel["VERSION_ID"], rel["VERSION_CODENAME"]
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		f.MemoryMB = int64(uint64(si.Totalram) * uint64(si.Unit) >> 20)
	}
	return f
}

// addresses lists the host's IP addresses as Facts.Addresses describes.
func addresses() []string {
	out := []string{}
	ifaces, err := net.Interfaces()
	if err != nil {
		return out
	}
	var addrs []netip.Addr
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 {
			continue
		}
		as, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range as {
			n, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, ok := netip.AddrFromSlice(n.IP)
			if !ok {
				continue
			}
			ip = ip.Unmap()
			if ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsUnspecified() || ip.IsMulticast() {
				continue
			}
			addrs = append(addrs, ip)
		}
	}
	// Sorted, so that a file rendered from them changes only when they do.
	slices.SortFunc(addrs, func(a, b netip.Addr) int { return a.Compare(b) })
	for _, a := range slices.Compact(addrs) {
		out = append(out, a.String())
	}
	return out
}

// Map gives the facts by the names templates use, each as its TOML key,
// and two more: ipv4 and ipv6, the addresses of each family. A fact the
// host could not read (an empty string, a count of zero) is left out, so
// that a template using it fails instead of rendering nothing.
func (f *Facts) Map() map[string]any {
	m := make(map[string]any, 10)
	str := func(name, v string) {
		if v != "" {
			m[name] = v
		}
	}
	str("hostname", f.Hostname)
	str("os_id", f.OSID)
	str("os_version", f.OSVersion)
	str("os_codename", f.OSCodename)
	str("arch", f.Arch)
	if f.CPUs > 0 {
		m["cpus"] = f.CPUs
	}
	if f.MemoryMB > 0 {
		m["memory_mb"] = f.MemoryMB
	}
	v4, v6 := []string{}, []string{}
	for _, a := range f.Addresses {
		if ip, err := netip.ParseAddr(a); err == nil && ip.Is4() {
			v4 = append(v4, a)
		} else {
			v6 = append(v6, a)
		}
	}
	m["addresses"] = append([]string{}, f.Addresses...)
	m["ipv4"], m["ipv6"] = v4, v6
	return m
}

// FactNames are the names Map can give, sorted.
var FactNames = []string{"addresses", "arch", "cpus", "hostname", "ipv4", "ipv6", "memory_mb", "os_codename", "os_id", "os_version"}
