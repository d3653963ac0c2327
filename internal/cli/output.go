package cli

import (
	"errors"
	"io"

	"github.com/spf13/pflag"

	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/jsondoc"
)

// format is the form a command prints its result in.
type format string

const (
	textFormat  format = ""      // lines for people, when no switch is given
	tableFormat format = "table" // --table: a table for people
	jsonFormat  format = "json"  // --json: JSON for machines
	tomlFormat  format = "toml"  // --toml
	htmlFormat  format = "html"  // --html FILE: a page for people, in a browser
)

// toFile are the formats written to a file: their switch takes the
// file's name (- for standard output), and its usage text names it with
// `FILE`.
var toFile = map[format]bool{htmlFormat: true}

// formatFlag is a format a command offers, as the switch named after it,
// with the help text the switch shows.
type formatFlag struct {
	format format
	usage  string
}

// The switches most commands that print a result offer.
var (
	tableFlag = formatFlag{tableFormat, "a table for people, one line per node, as wide as the terminal"}
	jsonFlag  = formatFlag{jsonFormat, "versioned JSON for machines"}
)

// output is a command's output-format flags: one switch for each format
// it offers besides text. The switches exclude each other; chosen is the
// one place that says so.
type output struct {
	offered []format
	given   []bool
	files   []string // the file each format written to a file was given
}

// addFlags adds a switch for each format offered, in that order.
func (o *output) addFlags(fs *pflag.FlagSet, offered ...formatFlag) {
	o.offered = make([]format, len(offered))
	o.given = make([]bool, len(offered))
	o.files = make([]string, len(offered))
	for i, f := range offered {
		o.offered[i] = f.format
		if toFile[f.format] {
			fs.Var(&fileFlag{&o.files[i], &o.given[i]}, string(f.format), f.usage)
			continue
		}
		fs.BoolVar(&o.given[i], string(f.format), false, f.usage)
	}
}

// file is the file given to format f's switch: a path, or - for standard
// output.
func (o output) file(f format) string {
	for i, g := range o.offered {
		if g == f {
			return o.files[i]
		}
	}
	return ""
}

// fileFlag is the switch of a format written to a file.
type fileFlag struct {
	path  *string
	given *bool
}

func (f *fileFlag) Set(s string) error {
	if s == "" {
		return errors.New("want a file name, or - for standard output")
	}
	*f.path, *f.given = s, true
	return nil
}

func (f *fileFlag) String() string {
	if f.path == nil {
		return ""
	}
	return *f.path
}

func (f *fileFlag) Type() string { return "string" }

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

// writeJSON writes v as a JSON document by jsondoc's rules, as it is
// whatever the locale.
func writeJSON(w io.Writer, v any) error {
	return jsondoc.Write(raw(w), v)
}
