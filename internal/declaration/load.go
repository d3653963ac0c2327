package declaration

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/tomlfile"
)

// Source is one declaration file as read.
type Source struct {
	// Name names the file in messages: the path as given, or "<stdin>".
	Name string
	// Data is the file's TOML.
	Data []byte
	// Dir is the directory `source =` paths are relative to: the file's
	// own directory, or the working directory for standard input.
	Dir string
}

// StdinName is how problems name a declaration read from standard input.
const StdinName = "<stdin>"

// Load reads the named declaration files, "-" meaning stdin (at most once).
func Load(paths []string, stdin io.Reader) ([]Source, error) {
	if len(paths) == 0 {
		return nil, fault.Usagef("no declaration file given")
	}
	srcs := make([]Source, 0, len(paths))
	usedStdin := false
	for _, p := range paths {
		if p == "-" {
			if usedStdin {
				return nil, fault.Usagef("standard input (-) given more than once")
			}
			usedStdin = true
			if stdin == nil {
				return nil, fault.Usagef("no standard input to read the declaration from")
			}
			data, err := tomlfile.ReadAll(stdin)
			if err != nil {
				return nil, fmt.Errorf("reading declaration from standard input: %w", err)
			}
			srcs = append(srcs, Source{Name: StdinName, Data: data, Dir: "."})
			continue
		}
		info, err := os.Stat(p)
		if err == nil && info.IsDir() {
			return nil, fault.WithHint(fault.Usagef("%s is a directory, not a declaration file", p),
				"name the files, for example "+filepath.Join(p, "*.toml"))
		}
		data, err := tomlfile.ReadFile(p)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("declaration file %s does not exist", p)
			}
			return nil, fmt.Errorf("reading declaration file: %w", tomlfile.In(p, err))
		}
		srcs = append(srcs, Source{Name: p, Data: data, Dir: filepath.Dir(p)})
	}
	return srcs, nil
}
