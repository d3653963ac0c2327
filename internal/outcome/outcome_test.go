package outcome

import "testing"

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lines []Line
		want  Outcome
	}{
		{"no lines", nil, Passed},
		{"all ok", []Line{{ID: "a", Status: OK}, {ID: "b", Status: OK}}, Passed},
		{"warn is not failure", []Line{{ID: "a", Status: Warn}}, Passed},
		{"changed and removed are verified", []Line{{ID: "a", Status: Changed}, {ID: "b", Status: Removed}}, Passed},
		{"one failed line fails", []Line{{ID: "a", Status: OK}, {ID: "b", Status: Failed}}, Failing},
		{"unknown status fails", []Line{{ID: "a", Status: "fine"}}, Failing},
		{"empty status fails", []Line{{ID: "a"}}, Failing},
	} {
		if got := Of(tc.lines); got != tc.want {
			t.Errorf("%s: Of = %s, want %s", tc.name, got, tc.want)
		}
		if failed := FailedLines(tc.lines); (len(failed) > 0) != (tc.want == Failing) {
			t.Errorf("%s: FailedLines = %v disagrees with Of", tc.name, failed)
		}
	}
}

func TestCheck(t *testing.T) {
	if err := Check([]Line{{ID: "a", Status: OK}}); err != nil {
		t.Error(err)
	}
	if err := Check([]Line{{Status: OK}}); err == nil {
		t.Error("a line without an id passed")
	}
	if err := Check([]Line{{ID: "a", Status: "outcome"}}); err == nil {
		t.Error("an unknown status passed")
	}
}

func TestTally(t *testing.T) {
	got := Tally([]Line{
		{ID: "a", Status: OK}, {ID: "b", Status: Warn}, {ID: "c", Status: Changed}, {ID: "d", Status: Changed},
		{ID: "e", Status: Removed}, {ID: "f", Status: Failed}, {ID: "g", Status: "fine"},
	})
	want := Counts{Unchanged: 2, Changed: 2, Removed: 1, Failed: 2, Warned: 1}
	if got != want {
		t.Errorf("Tally = %+v, want %+v", got, want)
	}
	if !got.Eventful() || (Counts{Unchanged: 3}).Eventful() {
		t.Error("Eventful")
	}
}
