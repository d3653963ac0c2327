// Package declaration owns the operator's source of desired state: the TOML
// files kept in git and given to `muster declare`. It loads them, validates
// them completely before anything is written (every problem, each with its
// file:line and key), and resolves what each node must have, producing the
// resource.Spec values that travel to hosts; files declared with a template
// are rendered for each node (template.go). It also describes the
// difference between two resolved states for `declare --dry-run`. The
// format is specified in man/muster-declaration.5; examples/declaration
// holds the complete example that page shows.
//
// internal/declare turns what this package resolves into a committed
// generation; internal/generation owns the documents of that generation
// (the commit, each node's declaration, the manifest), which hosts read.
package declaration
