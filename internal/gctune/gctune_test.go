package gctune

import "testing"

func TestPercent(t *testing.T) {
	const mb = 1 << 20
	for _, tc := range []struct {
		live, limit uint64
		want        int
	}{
		{0, 768 * mb, 100},
		{100 * mb, 768 * mb, 100},
		{384 * mb, 768 * mb, 100},
		{480 * mb, 768 * mb, 60},
		{512 * mb, 768 * mb, 50},
		{700 * mb, 768 * mb, 50},
		{2000 * mb, 768 * mb, 50},
	} {
		if got := Percent(tc.live, tc.limit); got != tc.want {
			t.Errorf("Percent(%d MB, %d MB) = %d, want %d", tc.live/mb, tc.limit/mb, got, tc.want)
		}
	}
}
