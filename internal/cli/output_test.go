package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/muster-tool/muster/internal/fault"
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

// TestOutputChosen: no switch is text, one switch is its format, and two
// are refused in the order the command offers them, however they are
// given.
func TestOutputChosen(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want format
		err  string
	}{
		{nil, textFormat, ""},
		{[]string{"--table"}, tableFormat, ""},
		{[]string{"--json"}, jsonFormat, ""},
		{[]string{"--json=false"}, textFormat, ""},
		{[]string{"--table", "--json=false"}, tableFormat, ""},
		{[]string{"--json", "--table"}, textFormat, "--table and --json exclude each other"},
		{[]string{"--toml", "--table", "--json"}, textFormat, "--table and --json exclude each other"},
		{[]string{"--json", "--toml"}, textFormat, "--json and --toml exclude each other"},
	} {
		var o output
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		o.addFlags(fs, tableFlag, jsonFlag, formatFlag{tomlFormat, "TOML"})
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		got, err := o.chosen()
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) {
			t.Errorf("%v: chosen() = %q, %v; want %q, %q", tc.args, got, err, tc.want, tc.err)
		}
		if err != nil && fault.ClassOf(err) != fault.Usage {
			t.Errorf("%v: %v is not a usage error", tc.args, err)
		}
	}
}
