package jsondoc

import (
	"bytes"
	"testing"
	"time"
)

type inner struct {
	Lines []string          `json:"lines"`
	Tags  map[string]string `json:"tags"`
	At    *time.Time        `json:"at"`
}

type doc struct {
	Version int     `json:"version"`
	Items   []inner `json:"items"`
	One     *inner  `json:"one"`
	None    *inner  `json:"none"`
	Note    string  `json:"note"`
}

// Nil lists and maps are written as [] and {} at every depth, through
// pointers, lists, maps and interfaces; nil pointers stay null; the value
// written is left as it was.
func TestWriteFillsNilListsAndMaps(t *testing.T) {
	d := doc{Version: 1, Items: []inner{{}}, One: &inner{}}
	for _, tc := range []struct {
		v    any
		want string
	}{
		{d, `{"version":1,"items":[{"lines":[],"tags":{},"at":null}],"one":{"lines":[],"tags":{},"at":null},"none":null,"note":""}`},
		{map[string]any{"version": 1, "nodes": []inner(nil), "by": map[string][]string{"a": nil}}, `{"by":{"a":[]},"nodes":[],"version":1}`},
		{doc{}, `{"version":0,"items":[],"one":null,"none":null,"note":""}`},
	} {
		var b bytes.Buffer
		if err := Write(&b, tc.v); err != nil {
			t.Fatal(err)
		}
		got := bytes.Join(bytes.Fields(b.Bytes()), nil)
		if string(got) != tc.want {
			t.Errorf("Write(%#v) = %s, want %s", tc.v, got, tc.want)
		}
	}
	if d.Items[0].Lines != nil || d.Items[0].Tags != nil {
		t.Error("Write changed the caller's value: its lists must stay as they were for the next reader")
	}
}
