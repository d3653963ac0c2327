package cli

import (
	"io"
	"testing"

	"github.com/spf13/pflag"

	"github.com/muster-tool/muster/internal/fault"
)

// The page's flags go with what they go with, and are refused otherwise
// before anything is read.
func TestCheckPageFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want format
		err  string
	}{
		{[]string{"--html", "rollout.html"}, htmlFormat, ""},
		{[]string{"--html", "-", "--last", "5", "--generation", "3", "--all", "--nodes", "web-*"}, htmlFormat, ""},
		{[]string{"--html", "rollout.html", "--wait", "--until", "all-applied"}, htmlFormat, ""},
		{[]string{"--html", "rollout.html", "--json"}, textFormat, "--json and --html exclude each other"},
		{[]string{"--history", "--html", "rollout.html"}, textFormat, "--history and --html exclude each other"},
		{[]string{"--last", "5"}, textFormat, "--last is for the page: give it with --html FILE"},
		{[]string{"--last", "5", "--table"}, textFormat, "--last is for the page: give it with --html FILE"},
	} {
		var o reportOptions
		fs := pflag.NewFlagSet("report", pflag.ContinueOnError)
		o.addFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		got, err := checkReportFlags(&Env{flags: fs}, &o)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err || fault.ClassOf(err) != fault.Usage {
				t.Errorf("%v: error %v, want the usage error %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%v: %q, %v; want %q", tc.args, got, err, tc.want)
		}
	}
}

// --html takes a file and --last a count of 1 or more: anything else is a
// usage error before anything is read.
func TestReportPageFlagValues(t *testing.T) {
	for _, args := range [][]string{
		{"--html"}, {"--html", ""}, {"--html", "p.html", "--last", "0"}, {"--html", "p.html", "--last", "some"},
	} {
		var o reportOptions
		fs := pflag.NewFlagSet("report", pflag.ContinueOnError)
		fs.SetOutput(io.Discard)
		o.addFlags(fs)
		if err := fs.Parse(args); err == nil {
			t.Errorf("%q: parsed, want a usage error", args)
		}
	}
}
