package tomlfile

import (
	"context"
	"fmt"
)

// The caps on a TOML document muster reads, checked before the TOML
// library sees it. The library parses nesting by recursion, so a document
// nested a few million levels deep overflows the stack (a crash, not an
// error), and it copies a key's whole path at every level, so a document
// nested some thousands of levels deep, by dotted keys, table headers or
// inline tables, takes minutes. Nothing muster writes comes near either cap.
const (
	// MaxDepth caps nesting: the tables, dotted key parts, inline tables
	// and arrays a value sits in.
	MaxDepth = 64
	// MaxSize caps a document's bytes, the same as a bundle's payload:
	// bigger is no declaration, report or state muster could carry.
	MaxSize = 64 << 20
)

// CapError is a document over one of the caps. Line is where the cap was
// crossed, 0 for the size cap.
type CapError struct {
	Line int
	Msg  string
}

func (e *CapError) Error() string     { return atLineText(e) }
func (e *CapError) at() (int, string) { return e.Line, e.Msg }

func depthError(line int) *CapError {
	return &CapError{Line: line, Msg: fmt.Sprintf("nesting deeper than %d levels (the cap on TOML nesting)", MaxDepth)}
}

// sizeError is the size cap's error for a document of size bytes, -1
// when how many more is not known.
func sizeError(size int64) *CapError {
	msg := fmt.Sprintf("more than %d bytes", MaxSize)
	if size >= 0 {
		msg = fmt.Sprintf("%d bytes, more than %d", size, MaxSize)
	}
	return &CapError{Msg: fmt.Sprintf("%s (the cap on the size of a TOML document, %d MiB)", msg, MaxSize>>20)}
}

// Check refuses a document over a cap, naming the cap and, for nesting,
// the line. It reads TOML only as far as nesting needs: strings and
// comments are skipped, brackets, braces, dots and equals signs outside
// them counted. It never counts less nesting than the TOML library
// builds for a document the library accepts (FuzzCheck holds it to
// that); for one the library refuses its answer does not matter. ctx
// stops it early.
func Check(ctx context.Context, data []byte) error {
	if len(data) > MaxSize {
		return sizeError(int64(len(data)))
	}
	sc := depthScanner{data: data, line: 1, key: true, parts: 1}
	return sc.run(ctx)
}

// depthScanner walks a document for Check.
type depthScanner struct {
	data []byte
	i    int
	line int
	// table is the depth of the table the last header opened.
	table int
	// open holds the arrays and inline tables the scan is inside.
	open []container
	// key is set where a key may start or go on; parts counts its parts.
	key   bool
	parts int
	// value is the depth of the next value in an array.
	value int
}

type container struct {
	brace bool // an inline table, else an array
	depth int  // the depth of the container itself
}

// checkEvery is how many bytes the scan reads between looks at ctx.
const checkEvery = 1 << 16

func (sc *depthScanner) run(ctx context.Context) error {
	next := checkEvery
	for sc.i < len(sc.data) {
		if sc.i >= next {
			if err := ctx.Err(); err != nil {
				return err
			}
			next = sc.i + checkEvery
		}
		c := sc.data[sc.i]
		sc.i++
		switch c {
		case '\n':
			sc.line++
			if len(sc.open) == 0 {
				sc.key, sc.parts = true, 1
			}
		case '#':
			for sc.i < len(sc.data) && sc.data[sc.i] != '\n' {
				sc.i++
			}
		case '"', '\'':
			sc.skipString(c)
		case '.':
			if sc.key {
				sc.parts++
				if sc.base()+sc.parts > MaxDepth {
					return depthError(sc.line)
				}
			}
		case '=':
			if sc.key {
				sc.key = false
				sc.value = sc.base() + sc.parts
				if sc.value > MaxDepth {
					return depthError(sc.line)
				}
			}
		case '[':
			if len(sc.open) == 0 && sc.key {
				if err := sc.header(); err != nil {
					return err
				}
				continue
			}
			if err := sc.push(false); err != nil {
				return err
			}
		case '{':
			if err := sc.push(true); err != nil {
				return err
			}
			sc.key, sc.parts = true, 1
		case ',':
			if n := len(sc.open); n > 0 {
				if top := sc.open[n-1]; top.brace {
					sc.key, sc.parts = true, 1
				} else {
					sc.value = top.depth + 1
				}
			}
		case ']', '}':
			if n := len(sc.open); n > 0 && sc.open[n-1].brace == (c == '}') {
				sc.open = sc.open[:n-1]
				sc.key = false
				if n > 1 && !sc.open[n-2].brace {
					sc.value = sc.open[n-2].depth + 1
				}
			}
		}
	}
	return nil
}

// base is the depth of the table a key is in: the innermost inline table,
// or the table of the last header.
func (sc *depthScanner) base() int {
	if n := len(sc.open); n > 0 {
		return sc.open[n-1].depth
	}
	return sc.table
}

// push opens an array or inline table as the next value.
func (sc *depthScanner) push(brace bool) error {
	d := sc.value
	if n := len(sc.open); n > 0 && !sc.open[n-1].brace {
		d = sc.open[n-1].depth + 1
	}
	// An array's elements are a level below it; counting them even when
	// there are none keeps the scan simple and errs on the safe side.
	if d > MaxDepth || !brace && d+1 > MaxDepth {
		return depthError(sc.line)
	}
	sc.open = append(sc.open, container{brace: brace, depth: d})
	sc.key = false
	sc.value = d + 1
	return nil
}

// header reads a table header after its first '[': [a.b] is a table two
// deep, [[a.b]] a table in an array, three deep.
func (sc *depthScanner) header() error {
	depth := 1
	if sc.i < len(sc.data) && sc.data[sc.i] == '[' {
		sc.i++
		depth++
	}
	for sc.i < len(sc.data) {
		c := sc.data[sc.i]
		sc.i++
		switch c {
		case '"', '\'':
			sc.skipString(c)
		case '.':
			depth++
			if depth > MaxDepth {
				return depthError(sc.line)
			}
		case ']', '\n':
			// A header ends at its first ']' outside quotes; a newline
			// first makes it a syntax error the library reports.
			if c == '\n' {
				sc.i--
			}
			if depth > MaxDepth {
				return depthError(sc.line)
			}
			sc.table = depth
			sc.key = false
			return nil
		}
	}
	return nil
}

// skipString skips a string whose opening quote q was just read: basic
// ("...", escapes), literal ('...'), or either of their multi-line forms.
func (sc *depthScanner) skipString(q byte) {
	d := sc.data
	if sc.i+1 < len(d) && d[sc.i] == q && d[sc.i+1] == q {
		sc.i += 2
		for sc.i < len(d) {
			c := d[sc.i]
			switch {
			case c == '\n':
				sc.line++
			case c == '\\' && q == '"':
				sc.i++
				if sc.i < len(d) && d[sc.i] == '\n' {
					sc.line++
				}
			case c == q && sc.i+2 < len(d) && d[sc.i+1] == q && d[sc.i+2] == q:
				// Up to two quotes more belong to the content: the
				// delimiter is the last three of the run.
				run := 3
				for run < 5 && sc.i+run < len(d) && d[sc.i+run] == q {
					run++
				}
				sc.i += run
				return
			}
			sc.i++
		}
		return
	}
	for sc.i < len(d) {
		c := d[sc.i]
		switch {
		case c == '\n':
			return // a syntax error; the newline is the caller's
		case c == '\\' && q == '"':
			sc.i++
			if sc.i < len(d) && d[sc.i] == '\n' {
				return
			}
		case c == q:
			sc.i++
			return
		}
		sc.i++
	}
}
