package enrol

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/mesh"
	"github.com/muster-tool/muster/spool"
)

// LabelOptions say how to change a node's labels.
type LabelOptions struct {
	Name   string
	Set    map[string]string
	Remove []string
	Now    time.Time
}

// LabelResult says what Label did.
type LabelResult struct {
	Identity *Identity
	// Changed is false when the node already had the labels asked for:
	// nothing was written.
	Changed bool
	// Absent are the labels asked to be removed that the node did not
	// have.
	Absent []string
}

// Label changes the labels of node o.Name's trusted identity without
// re-enrolling it, with one record signed by the mesh (enrol/label/...),
// which every later reading of the registry applies: declare selects
// roles and renders templates with the new labels, enrol list shows them,
// and a re-enrolment keeps them. A change that leaves the labels as they
// are writes nothing.
func Label(ctx context.Context, m *mesh.Mesh, reg *Registry, o LabelOptions) (*LabelResult, error) {
	if len(o.Set) == 0 && len(o.Remove) == 0 {
		return nil, fault.Usagef("nothing to change: give KEY=VALUE to set a label or --remove KEY")
	}
	if err := checkLabels(o.Set); err != nil {
		return nil, fault.New(fault.Usage, err)
	}
	for _, k := range o.Remove {
		if err := checkLabel(k, "x"); err != nil {
			return nil, fault.Usagef("--remove %q: label keys are 1 to 63 letters, digits, '-', '_' or '.'", k)
		}
		if _, ok := o.Set[k]; ok {
			return nil, fault.Usagef("label %s is both set and removed: give one", k)
		}
	}
	id := reg.Enrolled(o.Name)
	if id == nil {
		if n := reg.Nodes[o.Name]; n != nil {
			return nil, fault.WithHint(
				fmt.Errorf("node %s has no trusted identity: identity %s was revoked at %s, so its labels do not change", o.Name, n.Current.NodeID, n.Current.RevokedAt.Format(time.RFC3339)),
				"to bring it back with labels, issue it a token: muster enrol issue "+o.Name+" --label KEY=VALUE")
		}
		return nil, fault.WithHint(fmt.Errorf("node %s is not enrolled", o.Name), "see the enrolled nodes with: muster enrol list")
	}
	res := &LabelResult{Identity: id}
	c := LabelChange{Version: recordVersion, NodeID: id.NodeID, Name: id.Name, At: o.Now.UTC()}
	for _, k := range slices.Sorted(maps.Keys(o.Set)) {
		if v, ok := id.Labels[k]; !ok || v != o.Set[k] {
			if c.Set == nil {
				c.Set = map[string]string{}
			}
			c.Set[k] = o.Set[k]
		}
	}
	for _, k := range o.Remove {
		if _, ok := id.Labels[k]; ok {
			c.Remove = append(c.Remove, k)
		} else if !slices.Contains(res.Absent, k) {
			res.Absent = append(res.Absent, k)
		}
	}
	if len(c.Set) == 0 && len(c.Remove) == 0 {
		return res, nil
	}
	// The sequence number orders the changes of one node: the mesh's
	// clock, but always past the changes already made, so that one made
	// on a machine whose clock is behind still comes last. Of two changes
	// racing for one number, the second takes the next.
	seq := uint64(max(o.Now.UnixNano(), 0))
	for _, prev := range reg.labelChanges[id.NodeID] {
		seq = max(seq, prev.Seq+1)
	}
	for tries := 0; ; tries++ {
		c.Seq = seq
		data, err := bundle.SealTOML(c, labelCtx(id.NodeID, seq), m.Pair.Sign, m.Pair.Age.Recipient())
		if err != nil {
			return nil, err
		}
		err = m.Spool.Put(ctx, spool.LabelName(id.NodeID, seq), data)
		if err == nil {
			break
		}
		if !errors.Is(err, spool.ErrConflict) || tries == 100 {
			return nil, err
		}
		seq++
	}
	if reg.labelChanges == nil {
		reg.labelChanges, reg.labelsRead = map[string][]*LabelChange{}, map[string]bool{}
	}
	reg.labelChanges[id.NodeID] = append(reg.labelChanges[id.NodeID], &c)
	reg.labelsRead[spool.LabelName(id.NodeID, seq)] = true
	id.Labels = applyLabelChanges(id.Labels, []*LabelChange{&c})
	res.Changed = true
	return res, nil
}
