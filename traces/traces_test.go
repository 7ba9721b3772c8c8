package traces

import (
	"bytes"
	"slices"
	"testing"
)

func TestPresets(t *testing.T) {
	if got := Names(); !slices.Equal(got, []string{"agentic", "chat", "rag"}) {
		t.Fatalf("Names() = %v", got)
	}
	for _, n := range Names() {
		b, err := Preset(n)
		if err != nil || !bytes.Contains(b, []byte("name: "+n+"\n")) {
			t.Errorf("Preset(%s): %v", n, err)
		}
	}
	if _, err := Preset("../traces"); err == nil {
		t.Error("Preset accepted a path")
	}
}
