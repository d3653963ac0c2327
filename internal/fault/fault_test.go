package fault

import (
	"errors"
	"fmt"
	"testing"
)

func TestClassSurvivesWrapping(t *testing.T) {
	base := Refusedf("bad signature on %s", "x")
	wrapped := fmt.Errorf("declaration: %w", base)
	if ClassOf(wrapped) != Refused {
		t.Errorf("class lost through wrapping: %v", ClassOf(wrapped))
	}
	hinted := WithHint(wrapped, "do this")
	if ClassOf(hinted) != Refused || HintOf(hinted) != "do this" {
		t.Errorf("hint changed the class or was lost: %v %q", ClassOf(hinted), HintOf(hinted))
	}
	if ClassOf(errors.New("plain")) != Failure {
		t.Error("plain errors must be failures")
	}
	if New(Temporary, nil) != nil {
		t.Error("New(nil) must stay nil")
	}
	if HintOf(fmt.Errorf("outer: %w", WithHint(errors.New("x"), "inner hint"))) != "inner hint" {
		t.Error("a wrapped hint was not found")
	}
}
