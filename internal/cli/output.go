package cli

import (
	"encoding/json"
	"io"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/spf13/pflag"

	"github.com/muster-tool/muster/internal/fault"
)

// format is the form a command prints its result in.
type format string

const (
	textFormat  format = ""      // lines for people, when no switch is given
	tableFormat format = "table" // --table: a table for people
	jsonFormat  format = "json"  // --json: JSON for machines
	tomlFormat  format = "toml"  // --toml
)

// formatFlag is a format a command offers, as the switch named after it,
// with the help text the switch shows.
type formatFlag struct {
	format format
	usage  string
}

// The switches most commands that print a result offer.
var (
	tableFlag = formatFlag{tableFormat, "a table for people"}
	jsonFlag  = formatFlag{jsonFormat, "versioned JSON for machines"}
)

// output is a command's output-format flags: one switch for each format
// it offers besides text. The switches exclude each other; chosen is the
// one place that says so.
type output struct {
	offered []format
	given   []bool
}

// addFlags adds a switch for each format offered, in that order.
func (o *output) addFlags(fs *pflag.FlagSet, offered ...formatFlag) {
	o.offered = make([]format, len(offered))
	o.given = make([]bool, len(offered))
	for i, f := range offered {
		o.offered[i] = f.format
		fs.BoolVar(&o.given[i], string(f.format), false, f.usage)
	}
}

// chosen is the format asked for: text when no switch was given, and a
// usage error when two were.
func (o output) chosen() (format, error) {
	chosen := textFormat
	for i, f := range o.offered {
		if !o.given[i] {
			continue
		}
		if chosen != textFormat {
			return textFormat, fault.Usagef("--%s and --%s exclude each other", chosen, f)
		}
		chosen = f
	}
	return chosen, nil
}

// writeJSON writes v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// tableWidth is the width of every --table: readable in 80 columns.
const tableWidth = 80

// renderTable draws a table for people, in tableWidth columns: the last
// column, where the long text goes, is wrapped to what the others leave.
func renderTable(w io.Writer, header []string, rows [][]string) error {
	widths := make([]int, len(header))
	for i, h := range header {
		widths[i] = len(h)
	}
	for _, r := range rows {
		for i, c := range r[:len(r)-1] {
			for _, l := range strings.Split(c, "\n") {
				widths[i] = max(widths[i], len(l))
			}
		}
	}
	last := tableWidth - 1 - 3*len(header)
	for _, wd := range widths[:len(widths)-1] {
		last -= wd
	}
	last = max(last, 10)
	fitted := make([][]string, len(rows))
	for i, r := range rows {
		fitted[i] = append([]string(nil), r...)
		var parts []string
		for _, l := range strings.Split(r[len(r)-1], "\n") {
			parts = append(parts, wrap(l, last))
		}
		fitted[i][len(r)-1] = strings.Join(parts, "\n")
	}
	return fittedTable(w, header, fitted)
}

// fittedTable draws a table whose cells were already wrapped to fit
// tableWidth: tablewriter is told not to wrap them again.
func fittedTable(w io.Writer, header []string, rows [][]string) error {
	ew := &firstError{w: w}
	t := tablewriter.NewWriter(ew)
	t.SetHeader(header)
	t.SetAutoFormatHeaders(false)
	t.SetAutoWrapText(false)
	t.SetHeaderAlignment(tablewriter.ALIGN_LEFT)
	t.SetAlignment(tablewriter.ALIGN_LEFT)
	t.SetRowLine(true)
	t.AppendBulk(rows)
	t.Render()
	return ew.err
}

// firstError keeps the first error of the writes through it, for a writer
// (the table's) that drops them.
type firstError struct {
	w   io.Writer
	err error
}

func (f *firstError) Write(p []byte) (int, error) {
	if f.err != nil {
		return 0, f.err
	}
	n, err := f.w.Write(p)
	f.err = err
	return n, err
}

// wrap breaks s into lines of at most width characters, at spaces where
// it can and inside words (long paths) where it must.
func wrap(s string, width int) string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		for len(word) > width {
			if line != "" {
				lines, line = append(lines, line), ""
			}
			lines, word = append(lines, word[:width]), word[width:]
		}
		switch {
		case line == "":
			line = word
		case len(line)+1+len(word) <= width:
			line += " " + word
		default:
			lines, line = append(lines, line), word
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}
