package cli

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

// Every --table fits 80 columns, however long the failed lines are.
func TestRenderTableFitsEightyColumns(t *testing.T) {
	var buf bytes.Buffer
	long := "free-root: 77565 MiB free on /tmp/a/very/long/path/that/goes/on/and/on/web-2/root, below the threshold of 999999999 MiB"
	err := renderTable(&buf, []string{"NODE", "IDENTITY", "ENROLLED", "LABELS", "REVOKED", "ELIGIBILITY"}, [][]string{
		{"web-1", "8cc08f843f3b", "2026-12-02", "env=prod", "", "eligible"},
		{"web-2", "8eb0bbf48cb2", "2026-12-02", "env=prod\nrole=web", "3d827db17829\n2026-11-30", "ineligible\n" + long},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimRight(buf.String(), "\n"), "\n") {
		if n := utf8.RuneCountInString(l); n > tableWidth {
			t.Errorf("line is %d columns wide: %q", n, l)
		}
	}
	if !strings.Contains(strings.ReplaceAll(buf.String(), " ", ""), "threshold") {
		t.Error("the wrapped text lost words")
	}
}
