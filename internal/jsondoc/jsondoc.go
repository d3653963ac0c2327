// Package jsondoc writes muster's JSON documents, the output of every
// --json, one way for every command:
//
//   - a document is one object whose first key is "version", an integer
//     that changes when a key is renamed or removed or changes meaning
//     (adding a key keeps it);
//   - every key is always present, so a consumer can tell "none" from a
//     key it does not know: a list with nothing in it is [], a map {}, a
//     text "", and a time, a number or an object that does not apply is
//     null;
//   - times are RFC 3339 in UTC;
//   - a number that can pass 2^53, which JavaScript and jq 1.6 would
//     round (a report's seq, made from the clock in nanoseconds), is a
//     string of decimal digits.
//
// Write enforces the second rule for lists and maps; the document types
// follow the others, and a test parses each document muster prints.
package jsondoc

import (
	"encoding/json"
	"io"
	"reflect"
)

// Write writes v as an indented JSON document, with every nil list in it
// written as [] and every nil map as {}.
func Write(w io.Writer, v any) error {
	rv := reflect.ValueOf(v)
	if rv.IsValid() {
		c := reflect.New(rv.Type()).Elem()
		c.Set(rv)
		fill(c)
		v = c.Interface()
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// fill replaces the nil slices and maps in v, which is settable, with
// empty ones, through pointers, interfaces, structs, slices and maps. What
// it goes through it copies first, so the value written is left as the
// caller had it.
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return
		}
		c := reflect.New(v.Type().Elem())
		c.Elem().Set(v.Elem())
		fill(c.Elem())
		v.Set(c)
	case reflect.Interface:
		if v.IsNil() {
			return
		}
		c := reflect.New(v.Elem().Type()).Elem()
		c.Set(v.Elem())
		fill(c)
		v.Set(c)
	case reflect.Struct:
		t := v.Type()
		for i := range v.NumField() {
			if t.Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	case reflect.Slice:
		c := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		reflect.Copy(c, v)
		for i := range c.Len() {
			fill(c.Index(i))
		}
		v.Set(c)
	case reflect.Map:
		c := reflect.MakeMapWithSize(v.Type(), v.Len())
		iter := v.MapRange()
		for iter.Next() {
			e := reflect.New(iter.Value().Type()).Elem()
			e.Set(iter.Value())
			fill(e)
			c.SetMapIndex(iter.Key(), e)
		}
		v.Set(c)
	}
}
