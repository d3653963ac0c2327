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
