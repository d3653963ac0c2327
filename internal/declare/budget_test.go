package declare

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/muster-tool/muster/internal/report"
	"github.com/muster-tool/muster/internal/resource"
)

// budgetPaths returns directory paths whose resources together cost
// exactly report.NodeBudget, or as near as a byte of path (three bytes
// of cost) goes. The paths are long, so a few thousand fill the budget.
func budgetPaths() []string {
	dir := "/srv" + strings.Repeat("/"+strings.Repeat("p", 200), 9)
	cost := func(p string) int {
		s := resource.Spec{Kind: resource.Directory, Path: p}
		return report.ResourceCost(s.ID(), string(s.Kind), s.Path, s.Name)
	}
	paths := make([]string, report.NodeBudget/cost(dir+"/d00000"))
	total := 0
	for i := range paths {
		paths[i] = fmt.Sprintf("%s/d%05d", dir, i)
		total += cost(paths[i])
	}
	last := &paths[len(paths)-1]
	total -= cost(*last)
	*last = longer(*last, (report.NodeBudget-total-cost(*last))/3)
	return paths
}

// longer makes path n bytes longer, in components the system allows.
func longer(path string, n int) string {
	if n%201 == 1 {
		path += "x"
		n--
	}
	for ; n > 0; n -= min(n, 201) {
		path += "/" + strings.Repeat("x", min(n, 201)-1)
	}
	return path
}

func directories(node string, paths []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[node.%s.directory]\n", node)
	for _, p := range paths {
		fmt.Fprintf(&b, "%q = {}\n", p)
	}
	return b.String()
}

// TestNodeBudgetBoundary: declare takes a node whose resources fill its
// share of a report to the byte, and refuses one resource more, naming
// the node and the cap, before writing anything: whatever declare accepts,
// the node's host can report.
func TestNodeBudgetBoundary(t *testing.T) {
	f := newFixture(t)
	f.enrol("big-01", nil)
	paths := budgetPaths()
	before := f.objects()
	over := f.parse(directories("big-01", append(slices.Clone(paths), "/srv/one-more")), nil)
	_, err := f.declare(over, Options{})
	want := fmt.Sprintf("node big-01: its %d resources could take up to", len(paths)+1)
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "the cap on a node's share of its report (a report holds at most 64 MiB)") {
		t.Fatalf("one resource over the budget: %v", err)
	}
	if after := f.objects(); !slices.Equal(before, after) {
		t.Errorf("a refused declare wrote %v", after)
	}
	res := f.mustDeclare(f.parse(directories("big-01", paths), nil), Options{})
	if len(res.Nodes) != 1 || res.Nodes[0].Resources != len(paths) {
		t.Fatalf("declared %+v", res.Nodes)
	}
}
