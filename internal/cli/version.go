package cli

import "runtime/debug"

// version is stamped at build time with
// -ldflags "-X github.com/muster-tool/muster/internal/cli.version=v1.2.3".
var version string

// Version returns the stamped version, or the module version recorded in
// the binary, or "devel".
func Version() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			return v
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				return "devel-" + s.Value[:12]
			}
		}
	}
	return "devel"
}
