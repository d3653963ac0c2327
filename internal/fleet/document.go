package fleet

import (
	"io"
	"time"

	"github.com/muster-tool/muster/internal/jsondoc"
	"github.com/muster-tool/muster/internal/outcome"
)

// JSONVersion is the version of the JSON document of `muster report
// --json`, HistoryJSONVersion that of `muster report --history --json`.
// muster-report(1) documents the schemas; testdata/*.json are their golden
// examples. Adding a key keeps the version; renaming, removing or changing
// the meaning of one bumps it. Version 2: a report's seq is a string.
const (
	JSONVersion        = 2
	HistoryJSONVersion = 1
)

// The documents follow internal/jsondoc's rules: every key is always
// present, so a consumer can tell "none" (null or an empty list) from a
// key it does not know.
type jsonDoc struct {
	Version          int          `json:"version"`
	Generation       uint64       `json:"generation"`
	Run              string       `json:"run"`
	DeclaredAt       time.Time    `json:"declared_at"`
	Commit           string       `json:"commit"`
	ExpiresAt        *time.Time   `json:"expires_at"`
	NewestGeneration uint64       `json:"newest_generation"`
	Manifest         bool         `json:"manifest"`
	Wave             string       `json:"wave"`
	Totals           jsonTotals   `json:"totals"`
	Nodes            []jsonNode   `json:"nodes"`
	Refused          jsonRefused  `json:"refused"`
	Flagged          []jsonObject `json:"flagged"`
	Forks            []jsonFork   `json:"forks"`
}

type jsonFork struct {
	Generation uint64 `json:"generation"`
	At         uint64 `json:"at"`
	Named      string `json:"named"`
	Found      string `json:"found"`
}

type jsonTotals struct {
	Nodes          int `json:"nodes"`
	Applied        int `json:"applied"`
	Failed         int `json:"failed"`
	Outstanding    int `json:"outstanding"`
	Ineligible     int `json:"ineligible"`
	Unassigned     int `json:"unassigned"`
	Held           int `json:"held"`
	Decommissioned int `json:"decommissioned"`
}

type jsonNode struct {
	Name        string         `json:"name"`
	NodeID      string         `json:"node_id"`
	Status      Status         `json:"status"`
	Report      *jsonReport    `json:"report"`
	FailedLines []outcome.Line `json:"failed_lines"`
	LastApplied *uint64        `json:"last_applied"`
	HeldOn      *uint64        `json:"held_on"`
	LastContact *time.Time     `json:"last_contact"`
	Note        string         `json:"note"`
}

type jsonReport struct {
	Object string    `json:"object"`
	Seq    uint64    `json:"seq,string"` // from the clock in nanoseconds: past 2^53
	Start  time.Time `json:"start"`
	End    time.Time `json:"end"`
	Muster string    `json:"muster"`
	Notes  []string  `json:"notes"`
}

type jsonRefused struct {
	Revoked    int          `json:"revoked"`
	Unknown    int          `json:"unknown"`
	Unverified int          `json:"unverified"`
	Reports    []jsonObject `json:"reports"`
}

type jsonObject struct {
	Object     string `json:"object"`
	Node       string `json:"node"`
	NodeID     string `json:"node_id"`
	Generation uint64 `json:"generation"`
	Kind       string `json:"kind"`
	Reason     string `json:"reason"`
}

type jsonHistory struct {
	Version int                `json:"version"`
	History []jsonHistoryEntry `json:"history"`
}

type jsonHistoryEntry struct {
	Generation uint64     `json:"generation"`
	Run        string     `json:"run"`
	DeclaredAt time.Time  `json:"declared_at"`
	Manifest   bool       `json:"manifest"`
	Wave       string     `json:"wave"`
	Totals     jsonTotals `json:"totals"`
}

func totalsJSON(t Totals) jsonTotals {
	return jsonTotals(t)
}

func objectsJSON(os []Object) []jsonObject {
	out := make([]jsonObject, 0, len(os))
	for _, o := range os {
		out = append(out, jsonObject{o.Name, o.Node, o.NodeID, o.Generation, o.Kind, o.Reason})
	}
	return out
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// WriteJSON writes view v as the versioned JSON document, its nodes in
// the order given. The refused reports are counted always and listed only
// with all.
func WriteJSON(w io.Writer, v *View, all bool) error {
	counts := v.RefusedCounts()
	doc := jsonDoc{
		Version:          JSONVersion,
		Generation:       v.Generation,
		Run:              v.Run,
		DeclaredAt:       v.DeclaredAt.UTC(),
		NewestGeneration: v.Newest,
		Manifest:         v.Manifest,
		Wave:             v.Wave,
		Totals:           totalsJSON(v.Totals),
		Nodes:            []jsonNode{},
		Refused: jsonRefused{
			Revoked: counts[RefusedRevoked], Unknown: counts[RefusedUnknown], Unverified: counts[RefusedUnverified],
			Reports: []jsonObject{},
		},
		Flagged: objectsJSON(v.Flagged),
		Commit:  v.Commit,
		Forks:   []jsonFork{},
	}
	if !v.ExpiresAt.IsZero() {
		t := v.ExpiresAt.UTC()
		doc.ExpiresAt = &t
	}
	for _, f := range v.Forks {
		doc.Forks = append(doc.Forks, jsonFork{f.Generation, f.At, f.Named, f.Found})
	}
	if all {
		doc.Refused.Reports = objectsJSON(v.Refused)
	}
	for _, n := range v.Nodes {
		jn := jsonNode{Name: n.Name, NodeID: n.NodeID, Status: n.Status, FailedLines: nonNil(n.FailedLines), Note: n.Note}
		if r := n.Report; r != nil {
			jn.Report = &jsonReport{r.Object, r.Seq, r.Start.UTC(), r.End.UTC(), r.Muster, nonNil(r.Notes)}
		}
		if n.LastApplied != 0 {
			g := n.LastApplied
			jn.LastApplied = &g
		}
		if n.Status == Held && n.HeldOn != 0 {
			g := n.HeldOn
			jn.HeldOn = &g
		}
		if !n.LastContact.IsZero() {
			t := n.LastContact.UTC()
			jn.LastContact = &t
		}
		doc.Nodes = append(doc.Nodes, jn)
	}
	return encode(w, doc)
}

// WriteHistoryJSON writes the history as the versioned JSON document.
func WriteHistoryJSON(w io.Writer, h []HistoryEntry) error {
	doc := jsonHistory{Version: HistoryJSONVersion, History: []jsonHistoryEntry{}}
	for _, e := range h {
		doc.History = append(doc.History, jsonHistoryEntry{e.Generation, e.Run, e.DeclaredAt.UTC(), e.Manifest, e.Wave, totalsJSON(e.Totals)})
	}
	return encode(w, doc)
}

func encode(w io.Writer, v any) error {
	return jsondoc.Write(w, v)
}
