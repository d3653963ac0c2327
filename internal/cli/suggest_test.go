package cli

import (
	"strings"
	"testing"
)

// A mistyped command or flag is a usage error whose hint names what it
// was probably meant to be, and still says where help is.
func TestDidYouMean(t *testing.T) {
	for _, tc := range []struct {
		args []string
		err  string
		hint string
	}{
		{[]string{"reprot"}, `unknown command "reprot"`, "did you mean report? see: muster help"},
		{[]string{"rep"}, `unknown command "rep"`, "did you mean report? see: muster help"},
		{[]string{"sync"}, `unknown command "sync"`, "did you mean spool sync? see: muster help"},
		{[]string{"list"}, `unknown command "list"`, "did you mean brief list, enrol list or spool repo list? see: muster help"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`, "see: muster help"},
		{[]string{"enrol", "lst"}, `unknown command "lst" for muster enrol`, "did you mean list? see: muster help enrol"},
		{[]string{"spool", "verfy"}, `unknown command "verfy" for muster spool`, "did you mean verify? see: muster help spool"},
		{[]string{"report", "--fail-of", "none"}, "unknown flag: --fail-of", "did you mean --fail-on? see: muster help report"},
		{[]string{"report", "--jsn"}, "unknown flag: --jsn", "did you mean --json? see: muster help report"},
		{[]string{"--mesg", "m", "report"}, "unknown flag: --mesg", "did you mean --mesh? see: muster help"},
		{[]string{"declare", "--dryrun"}, "unknown flag: --dryrun", "did you mean --dry-run? see: muster help declare"},
		{[]string{"report", "--zzzzzz"}, "unknown flag: --zzzzzz", "see: muster help report"},
	} {
		code, out, errs := runMuster(t, tc.args...)
		want := "muster: error: " + tc.err + "\nmuster: hint: " + tc.hint + "\n"
		if code != ExitUsage || out != "" || errs != want {
			t.Errorf("muster %s: exit %d, stdout %q, stderr %q; want %d and %q", strings.Join(tc.args, " "), code, out, errs, ExitUsage, want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"report", "report", 0}, {"reprot", "report", 2}, {"lst", "list", 1}, {"", "abc", 3}, {"kitten", "sitting", 3}} {
		if d := editDistance(tc.a, tc.b); d != tc.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, d, tc.d)
		}
	}
}
