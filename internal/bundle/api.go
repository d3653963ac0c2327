package bundle

// Context binds a bundle to where it belongs. The signature covers it, so a
// bundle cannot be replayed as another kind, for another node, or under
// another name in the spool.
type Context struct {
	Kind string // "declaration", "report", "briefing", "join", "commit", "admission", ...
	Node string // opaque node id, or "" for mesh-wide objects
	Name string // the object's name in the spool
}
