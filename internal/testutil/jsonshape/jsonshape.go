// Package jsonshape checks a JSON document muster printed against the Go
// type it was written from, by the rules of internal/jsondoc: every key
// of the type present and no other, lists and maps never null, times in
// RFC 3339, and a number that can pass 2^53 written as a string.
package jsonshape

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"
)

// Check returns the ways data breaks the rules for documents of doc's
// type (doc is a value or a pointer to one), or nil.
func Check(data []byte, doc any) []string {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return []string{fmt.Sprintf("not JSON: %v", err)}
	}
	if dec.More() {
		return []string{"more than one JSON value"}
	}
	c := &checker{}
	t := reflect.TypeOf(doc)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if m, ok := v.(map[string]any); !ok || m["version"] == nil {
		c.errorf("$", "a document is an object with a version")
	}
	c.check("$", v, t, false)
	return c.problems
}

type checker struct{ problems []string }

func (c *checker) errorf(path, format string, args ...any) {
	c.problems = append(c.problems, path+": "+fmt.Sprintf(format, args...))
}

var (
	timeType          = reflect.TypeOf(time.Time{})
	textMarshalerType = reflect.TypeOf((*encoding.TextMarshaler)(nil)).Elem()
	jsonMarshalerType = reflect.TypeOf((*json.Marshaler)(nil)).Elem()
)

// check checks value v at path against type t; asString says the field
// has the ",string" option.
func (c *checker) check(path string, v any, t reflect.Type, asString bool) {
	if t.Kind() == reflect.Pointer {
		if v != nil {
			c.check(path, v, t.Elem(), asString)
		}
		return
	}
	if v == nil {
		if t.Kind() != reflect.Interface {
			c.errorf(path, "null where the type is %s: only a pointer may be null", t)
		}
		return
	}
	switch {
	case t == timeType:
		s, ok := v.(string)
		if _, err := time.Parse(time.RFC3339, s); !ok || err != nil {
			c.errorf(path, "%v is not an RFC 3339 time", v)
		} else if !strings.HasSuffix(s, "Z") {
			c.errorf(path, "%s is not in UTC", s)
		}
		return
	case t.Implements(jsonMarshalerType) || t.Implements(textMarshalerType):
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			c.errorf(path, "want an object, got %T", v)
			return
		}
		known := map[string]bool{}
		c.fields(path, m, t, known)
		for k := range m {
			if !known[k] {
				c.errorf(path, "key %q is not in the document's type", k)
			}
		}
	case reflect.Slice, reflect.Array:
		l, ok := v.([]any)
		if !ok {
			c.errorf(path, "want a list, got %T", v)
			return
		}
		for i, e := range l {
			c.check(fmt.Sprintf("%s[%d]", path, i), e, t.Elem(), false)
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			c.errorf(path, "want an object, got %T", v)
			return
		}
		for k, e := range m {
			c.check(path+"."+k, e, t.Elem(), false)
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			c.errorf(path, "want a string, got %T", v)
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			c.errorf(path, "want true or false, got %T", v)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		if asString {
			s, ok := v.(string)
			if !ok || s == "" || strings.Trim(s, "0123456789") != "" {
				c.errorf(path, "want a number written as a string, got %v", v)
			}
			return
		}
		n, ok := v.(json.Number)
		if !ok {
			c.errorf(path, "want a number, got %T", v)
			return
		}
		if f, err := n.Float64(); err != nil || f > 1<<53 || f < -(1<<53) {
			c.errorf(path, "%s is past 2^53: it must be a string", n)
		}
	}
}

// fields checks the keys of struct type t in m, with the fields of
// embedded structs as the encoder flattens them.
func (c *checker) fields(path string, m map[string]any, t reflect.Type, known map[string]bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				c.fields(path, m, ft, known)
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		if strings.Contains(","+opts+",", ",omitempty,") || strings.Contains(","+opts+",", ",omitzero,") {
			c.errorf(path+"."+name, "omitempty: every key is always present")
		}
		known[name] = true
		v, ok := m[name]
		if !ok {
			c.errorf(path, "key %q is missing", name)
			continue
		}
		c.check(path+"."+name, v, f.Type, strings.Contains(","+opts+",", ",string,"))
	}
}
