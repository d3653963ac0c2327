package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// Two output formats at once are a usage error, refused before anything
// is read: the mesh and the host config named here do not exist.
func TestOutputFormatsExcludeEachOther(t *testing.T) {
	nowhere := filepath.Join(t.TempDir(), "none")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"report", "--mesh", nowhere, "--table", "--json"}, "--table and --json exclude each other"},
		{[]string{"enrol", "list", "--mesh", nowhere, "--json", "--table"}, "--table and --json exclude each other"},
		{[]string{"brief", "list", "--mesh", nowhere, "--table", "--json"}, "--table and --json exclude each other"},
		{[]string{"brief", "--config", nowhere, "--toml", "--json"}, "--json and --toml exclude each other"},
	} {
		code, out, errs := runMuster(t, tc.args...)
		if code != ExitUsage || out != "" || errs != "muster: error: "+tc.want+"\n" {
			t.Errorf("muster %s: exit %d, stdout %q, stderr %q; want %d and %q", strings.Join(tc.args, " "), code, out, errs, ExitUsage, tc.want)
		}
	}
}
