package cli

import (
	"testing"

	"github.com/spf13/pflag"

	"github.com/muster-tool/muster/internal/fault"
)

// TestCheckReportFlags: report refuses, before it reads anything, the
// flags that exclude each other and the values it does not know, and
// otherwise says which format to print.
func TestCheckReportFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want format
		err  string
	}{
		{nil, textFormat, ""},
		{[]string{"--table", "--sort", "contact"}, tableFormat, ""},
		{[]string{"--history", "--json", "--fail-on", "none"}, jsonFormat, ""},
		{[]string{"--generation", "4", "--fail-on", "outstanding", "--sort", "status"}, textFormat, ""},
		{[]string{"--table", "--json"}, textFormat, "--table and --json exclude each other"},
		{[]string{"--history", "--generation", "3"}, textFormat, "--history and --generation exclude each other"},
		{[]string{"--fail-on", "maybe"}, textFormat, `--fail-on "maybe": want failed, outstanding or none`},
		{[]string{"--sort", "bogus"}, textFormat, `--sort "bogus": want name, status or contact`},
		{[]string{"--wait", "--until", "applied=50%", "--timeout", "30m", "--nodes", "web-*", "--json"}, jsonFormat, ""},
		{[]string{"--until", "applied=2"}, textFormat, "--until needs --wait"},
		{[]string{"--timeout", "1m"}, textFormat, "--timeout needs --wait"},
		{[]string{"--interval", "1s"}, textFormat, "--interval needs --wait"},
		{[]string{"--wait", "--history"}, textFormat, "--wait and --history exclude each other"},
		{[]string{"--wait", "--until", "most"}, textFormat, `--until "most": want applied=N, applied=P% or all-applied`},
		{[]string{"--wait", "--interval", "0s"}, textFormat, "--interval 0s: want a positive duration such as 10s"},
		{[]string{"--nodes", "web-["}, textFormat, `--nodes: node pattern "web-[" is malformed`},
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
